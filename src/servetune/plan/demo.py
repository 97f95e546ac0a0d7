"""`servetune plan-seeds` (also the first part of `servetune demo`): plans the seed systems and prints one
summary table (or every plan in full)."""

from __future__ import annotations

import json
import shutil

from servetune.engines.config import EngineConfig
from servetune.hardware.catalog import GiB
from servetune.hardware.gpus import parse_gpu_arg
from servetune.model.bundled import bundled_model
from servetune.plan.api import Plan, plan_for
from servetune.plan.placement import place
from servetune.plan.seeds import SEEDS, SeedSystem


def plan_seed(seed: SeedSystem) -> Plan:
    """The plan of one seed system."""
    path = bundled_model(seed.model)
    assert path is not None, seed.model
    placed = place(parse_gpu_arg(seed.gpu), seed.flags)
    config = EngineConfig(model=str(path), flags=seed.flags)
    return plan_for(config, placed.gpu, placed.gpus, vllm_version=seed.vllm_version)


def run_demo(*, detail: bool = False, as_json: bool = False) -> None:
    """Prints the seed plans."""
    plans = [(seed, plan_seed(seed)) for seed in SEEDS]
    if as_json:
        print(json.dumps({seed.key: plan.model_dump(mode="json") for seed, plan in plans}, indent=2))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from servetune.plan.render import render

    console = Console(width=shutil.get_terminal_size((120, 24)).columns)  # the terminal's width; 120 for a file
    if detail:
        for seed, plan in plans:
            console.rule(seed.title)
            render(plan, console)
        return
    table = Table(
        title="servetune plan: the five seed systems (vLLM ledger; overheads modelled)",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        expand=True,
    )
    table.add_column("system", ratio=3)
    table.add_column("verdict", ratio=1)
    for col in ("weights/GPU", "KV avail", "block", "blocks", "max conc.", "decode"):
        table.add_column(col, justify="right", no_wrap=True)
    for seed, plan in plans:
        fixes = "; ".join(f.change for f in plan.fixes[:2]) or "no single fix"
        verdict = "[green]fits[/]" if plan.feasible else f"[red]no[/] (fix: {fixes})"
        speed = f"{plan.speeds[0].expected:.0f} tok/s" if plan.feasible else "-"
        table.add_row(
            seed.title,
            verdict,
            f"{plan.weights_bytes_per_gpu / GiB:.2f} GiB",
            f"{plan.available_kv_bytes / GiB:.2f} GiB",
            str(plan.block_size),
            f"{plan.num_blocks:,}",
            f"{plan.max_concurrency:.2f}x",
            speed,
        )
    console.print(table)
    console.print(
        "decode = one stream's tok/s by the roofline. Full plans with flags: servetune plan-seeds --detail "
        "(one system: servetune plan --model qwen3.6-27b --gpu ...)"
    )
