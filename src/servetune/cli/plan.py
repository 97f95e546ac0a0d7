"""`servetune plan` (one model on one GPU setup, vLLM's flag names) and `servetune plan-seeds` (the five seed systems).

Imports of the plan room happen inside the commands so that `servetune --help` stays fast.
"""

from __future__ import annotations

from typing import Any

import typer

from servetune.errors import ServetuneError


def _available(text: str | None) -> int | None:
    """`71.16` / `71.16GiB` (GiB, as vLLM logs it) or a plain byte count (>= 2**20)."""
    if text is None:
        return None
    raw = text.strip().lower().replace(" ", "").removesuffix("gib")
    try:
        value = float(raw)
    except ValueError as err:
        raise ServetuneError(
            f"--available-kv {text!r} is not a number", "give GiB as vLLM logs it (71.16) or bytes"
        ) from err
    if not 0 < value < 2**60:  # NaN and infinities fail this too
        raise ServetuneError(f"--available-kv {text!r} is not a positive size", "give GiB (71.16) or bytes")
    return int(value) if value >= 2**20 else round(value * 1024**3)


def register(app: typer.Typer) -> None:
    """Adds `plan` and `plan-seeds`."""

    @app.command(
        "plan",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def plan(
        ctx: typer.Context,
        model: str = typer.Option(
            ..., "--model", help="Model directory or config.json (or a bundled name, e.g. qwen3.6-27b)."
        ),
        gpu: str = typer.Option(
            "local",
            "--gpu",
            help="GPU model and count: A100-80G-SXMx2, H200, 2xL40S, local (NVML), custom:mem=..,bw=..,tflops=..",
        ),
        vllm_version: str = typer.Option(
            None, "--vllm-version", help="vLLM release to follow (0.11 to 0.33; latest by default)."
        ),
        available_kv: str = typer.Option(
            None,
            "--available-kv",
            help="Measured 'Available KV cache memory' (GiB or bytes): skips the overhead model.",
        ),
        from_log: str = typer.Option(
            None,
            "--from-log",
            help="A vLLM startup log: reproduce its capacity lines from its "
            "'Available KV cache memory' (flags from its 'non-default args' line unless "
            "given here) and compare the overhead model with it.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
        show_config: bool = typer.Option(
            False, "--show-config", help="Print the engine config and GPUs servetune read from the arguments, and stop."
        ),
        pass_unknown: bool = typer.Option(
            False, "--pass-unknown-flags", help="Pass flags missing from servetune's vLLM table on untouched."
        ),
    ) -> None:
        """Plan a vLLM deployment: does it fit, how many requests at max_model_len, how fast, which flags.

        Every other option is a `vllm serve` flag by vLLM's own name, e.g. --tensor-parallel-size 2 (-tp 2),
        --max-model-len 128K, --gpu-memory-utilization 0.9, --kv-cache-dtype fp8, --quantization awq,
        --max-num-seqs 256, --max-num-batched-tokens 8192, --enable-prefix-caching / --no-enable-prefix-caching,
        --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}', --language-model-only,
        --enforce-eager, --block-size, --kv-cache-memory-bytes, --dtype. Flags the planner does not model are
        carried into the emitted command line.
        """
        import json

        from servetune.plan.api import plan_for
        from servetune.plan.target import resolve_target

        target = resolve_target(
            engine="vllm",
            model=model,
            argv=list(ctx.args),
            gpu=gpu,
            vllm_version=vllm_version,
            allow_unknown=pass_unknown,
        )
        if show_config:
            typer.echo(json.dumps(target.shown(), indent=2))
            return
        cfg, spec_gpu, count = target.config, target.gpu, target.gpus
        if from_log:
            _against_log(cfg, spec_gpu, count, vllm_version, from_log, as_json)
            return
        result = plan_for(cfg, spec_gpu, count, vllm_version=vllm_version, available_kv_bytes=_available(available_kv))
        _emit(result, as_json)

    @app.command("plan-seeds")
    def plan_seeds(
        detail: bool = typer.Option(False, "--detail", help="Print every plan in full."),
        as_json: bool = typer.Option(False, "--json", help="Print the plans as JSON."),
    ) -> None:
        """Plan the five seed systems from the field reports (bundled configs, no download, no GPU)."""
        from servetune.plan.demo import run_demo

        run_demo(detail=detail, as_json=as_json)


def _against_log(cfg: Any, gpu: Any, count: int, version: str | None, path: str, as_json: bool) -> None:
    """Plans with the log's available KV memory (exact part) and without it (overhead model), and compares."""
    from pathlib import Path

    from servetune.engines.vllm import parse_vllm_log
    from servetune.plan.calibrate import compare_with_log

    try:
        text = Path(path).read_text(errors="replace")
    except OSError as err:
        raise ServetuneError(
            f"cannot read --from-log {path}: {err.strerror}", "pass the path of a vLLM startup log"
        ) from err
    result = compare_with_log(cfg, gpu, count, version, parse_vllm_log(text))
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    from rich.console import Console

    from servetune.plan.render import render, render_check

    console = Console(width=130)
    render(result.plan, console)
    render_check(result.check, result.logged, result.plan, result.lines_reproduced, console)


def _emit(plan: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(plan.model_dump_json(indent=2))
        return
    from rich.console import Console

    from servetune.plan.render import render

    render(plan, Console(width=130))
