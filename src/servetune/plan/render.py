"""A plan as readable text (rich tables) for the terminal and the committed examples."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servetune.hardware.catalog import GiB

if TYPE_CHECKING:
    from rich.console import Console

    from servetune.engines.facts import EngineFacts
    from servetune.plan.api import Plan
    from servetune.plan.calibrate import OverheadCheck


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def render(plan: Plan, console: Console) -> None:
    """Prints the verdict, the ledger, capacity, speeds, fixes and the command lines."""
    from rich.table import Table

    verdict = "[bold green]FITS[/]" if plan.feasible else "[bold red]DOES NOT FIT[/]"
    console.print(
        f"{verdict}  {plan.model_name} on {plan.num_gpus}x {plan.gpu}  "
        f"(vLLM {plan.vllm_version}, TP {plan.tensor_parallel_size}"
        f", PP {plan.pipeline_parallel_size}"
        + (f", DP {plan.data_parallel_size} (figures per replica)" if plan.data_parallel_size > 1 else "")
        + f", max_model_len {plan.max_model_len:,})"
    )
    for reason in plan.reasons:
        console.print(f"  [red]x[/] {reason}")
    for note in plan.notes:
        console.print(f"  [yellow]![/] {note}")

    ledger = Table(title="Memory ledger (per GPU)", show_header=True, header_style="bold")
    ledger.add_column("item")
    ledger.add_column("value", justify="right")
    ledger.add_column("how")
    ov = plan.overhead
    rows: list[tuple[str, str, str]] = [
        ("GPU memory (CUDA total)", _gib(plan.gpu_memory_bytes), plan.gpu),
        ("budget", _gib(plan.requested_bytes), f"ceil(total x {plan.gpu_memory_utilization})"),
        ("weights", _gib(plan.weights_bytes_per_gpu), f"{plan.params_loaded / 1e9:.2f} B params, {plan.weight_format}"),
        ("non-torch (NCCL, cuBLAS)", _gib(ov.non_torch_bytes), "model"),
        (
            "activation peak",
            _gib(ov.peak_activation_bytes),
            f"{ov.family} forward of {plan.max_num_batched_tokens} tokens {ov.activation_bytes / GiB:.2f} "
            f"+ sampler x {min(plan.max_num_seqs, plan.max_num_batched_tokens)} {ov.sampler_bytes / GiB:.2f}",
        ),
        (
            "CUDA graphs",
            _gib(ov.cudagraph_bytes),
            "model"
            if ov.cudagraph_bytes
            else "not reserved before the KV cache (--enforce-eager, vLLM < 0.20, or 0.24's V2 model runner)",
        ),
    ]
    if ov.mm_encoder_bytes:
        rows.append(("vision encoder profile", _gib(ov.mm_encoder_bytes), "skipped by --language-model-only"))
    span = (
        ""
        if plan.available_kv_source != "model"
        else (f" ({_gib(plan.available_kv_low_bytes)} .. {_gib(plan.available_kv_high_bytes)})")
    )
    rows.append(("available KV cache", _gib(plan.available_kv_bytes), f"{plan.available_kv_source}{span}"))
    for row in rows:
        ledger.add_row(*row)
    console.print(ledger)

    lay = plan.layout
    cap = Table(title="KV cache and capacity", show_header=True, header_style="bold")
    cap.add_column("item")
    cap.add_column("value", justify="right")
    kinds: dict[str, int] = {}
    for g in lay.groups:
        kinds[g.kind] = kinds.get(g.kind, 0) + 1
    cap_rows = [
        (
            "KV dtype / prefix caching / spec tokens",
            f"{plan.kv_cache_dtype} / {'on' if plan.prefix_caching else 'off'} / {plan.num_speculative_tokens}",
        ),
        (
            "block size (tokens)",
            f"{lay.block_size}" + (" (raised to fit the GDN state)" if lay.block_size_forced else ""),
        ),
        ("page per layer", f"{lay.page_size_bytes:,} B"),
        ("groups x layers per group", f"{', '.join(f'{n} {k}' for k, n in kinds.items())} x {lay.group_size}"),
        ("bytes per block", f"{lay.bytes_per_block:,} B"),
        ("num blocks", f"{plan.num_blocks:,}"),
        ("blocks per max-length request", f"{plan.blocks_per_request:,}"),
        (
            "max concurrency @ max_model_len",
            f"{plan.max_concurrency:.2f}x"
            + (
                ""
                if plan.available_kv_source != "model"
                else f"  ({plan.max_concurrency_low:.2f} .. {plan.max_concurrency_high:.2f})"
            ),
        ),
        ("max_num_seqs / max_num_batched_tokens", f"{plan.max_num_seqs} / {plan.max_num_batched_tokens}"),
    ]
    for label, value in cap_rows:
        cap.add_row(label, value)
    console.print(cap)
    if plan.feasible:
        console.print("vLLM will print:")
        for line in plan.log_lines:
            console.print(f"  {line}", markup=False, highlight=False)
    else:
        console.print("vLLM refuses to start with these flags (see the reasons above).")

    if plan.speeds:
        speed = Table(title="Speed (roofline)", show_header=True, header_style="bold")
        speed.add_column("case")
        speed.add_column("ideal", justify="right")
        speed.add_column("expected", justify="right")
        for s in plan.speeds:
            fmt = "{:,.1f} " if s.unit == "tok/s" else "{:,.2f} "
            speed.add_row(s.name, fmt.format(s.ideal) + s.unit, fmt.format(s.expected) + s.unit)
        console.print(speed)

    if plan.fixes:
        fixes = Table(title="Fixes that make it fit", show_header=True, header_style="bold")
        fixes.add_column("change")
        fixes.add_column("weights/GPU", justify="right")
        fixes.add_column("max concurrency", justify="right")
        fixes.add_column("KV tokens", justify="right")
        for f in plan.fixes:
            fixes.add_row(
                f.change, f"{f.weights_gib_per_gpu:.2f} GiB", f"{f.max_concurrency:.2f}x", f"{f.kv_cache_tokens:,}"
            )
        console.print(fixes)
    if not plan.feasible:
        console.print(
            "[bold red]These commands are the config as given, which does NOT fit:[/] apply one of the fixes above "
            "first (their flags go in the same place)."
        )
    console.print("serve:", markup=False, highlight=False)
    console.print(plan.serve_command, markup=False, highlight=False, soft_wrap=True)
    console.print("docker:", markup=False, highlight=False)
    console.print(plan.docker_command, markup=False, highlight=False, soft_wrap=True)
    for note in plan.command_notes:
        console.print(f"  note: {note}", markup=False, highlight=False)


def render_check(check: OverheadCheck, figures: EngineFacts, plan: Plan, match: bool, console: Console) -> None:
    """The log against the plan: exact part (lines, block size) and modelled part (weights, overheads)."""
    from rich.table import Table

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:,.2f} GiB"

    table = Table(title="Planner vs the log", show_header=True, header_style="bold")
    table.add_column("item")
    table.add_column("planner", justify="right")
    table.add_column("log", justify="right")
    table.add_row("block size", str(plan.block_size), "-" if figures.block_size is None else str(figures.block_size))
    table.add_row("weights per GPU", num(check.weights_model_gib), num(check.weights_log_gib))
    table.add_row(
        "available KV (overhead model)",
        f"{num(check.available_model_gib)} "
        f"({check.available_model_low_gib:.2f} .. {check.available_model_high_gib:.2f})",
        num(check.available_log_gib),
    )
    table.add_row("non-KV, non-weight memory", num(check.non_kv_model_gib), num(check.non_kv_log_gib))
    table.add_row("CUDA-graph estimate", num(check.cudagraph_model_gib), num(check.cudagraph_log_gib))
    console.print(table)
    for line in figures.capacity_lines or []:
        console.print(f"  log:     {line}", markup=False, highlight=False)
    for line in plan.log_lines:
        console.print(f"  planner: {line}", markup=False, highlight=False)
    verdict = "[green]reproduced exactly[/]" if match else "[red]differ[/]"
    console.print(f"capacity lines from the log's available KV memory: {verdict}")
