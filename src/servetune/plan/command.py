"""What `servetune plan` does with its arguments (`plan/args.py` `PlanArgs`): read the target (the engine
vocabulary and the `--gpu` reader, as every command does), then print it (`--show-config`), the plan, or the
plan held against a vLLM startup log (`--from-log`)."""

from __future__ import annotations

import json

from rich.console import Console

from servetune.engines.config import EngineConfig
from servetune.engines.vllm import parse_vllm_log
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GPUSpec
from servetune.plan.api import Plan, plan_for
from servetune.plan.args import PlanArgs
from servetune.plan.calibrate import compare_with_log
from servetune.plan.render import render, render_check
from servetune.plan.target import resolve_target

WIDTH = 130
"""The plan's tables fit in 130 columns."""


def run_plan(args: PlanArgs) -> None:
    """`servetune plan`."""
    target = resolve_target(
        engine="vllm",
        model=args.model,
        argv=list(args.engine_flags),
        gpu=args.gpu,
        vllm_version=args.vllm_version,
        allow_unknown=args.pass_unknown_flags,
    )
    if args.show_config:
        print(json.dumps(target.shown(), indent=2))
    elif args.from_log is not None:
        _against_log(target.config, target.gpu, target.gpus, args)
    else:
        plan = plan_for(
            target.config,
            target.gpu,
            target.gpus,
            vllm_version=args.vllm_version,
            available_kv_bytes=args.available_kv_bytes(),
        )
        _emit(plan, args.as_json)


def _against_log(cfg: EngineConfig, gpu: GPUSpec, count: int, args: PlanArgs) -> None:
    """Plans with the log's available KV memory (exact part) and without it (overhead model), and compares."""
    assert args.from_log is not None
    try:
        text = args.from_log.read_text(errors="replace")
    except OSError as err:
        raise ServetuneError(
            f"cannot read --from-log {args.from_log}: {err.strerror}", "pass the path of a vLLM startup log"
        ) from err
    result = compare_with_log(cfg, gpu, count, args.vllm_version, parse_vllm_log(text))
    if args.as_json:
        print(result.model_dump_json(indent=2))
        return
    console = Console(width=WIDTH)
    render(result.plan, console)
    render_check(result.check, result.logged, result.plan, result.lines_reproduced, console)


def _emit(plan: Plan, as_json: bool) -> None:
    if as_json:
        print(plan.model_dump_json(indent=2))
    else:
        render(plan, Console(width=WIDTH))
