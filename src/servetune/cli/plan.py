"""`servetune plan` (one model on one GPU setup, vLLM's flag names) and `servetune plan-seeds` (the five seed
systems); their options are `plan/args.py`'s models, and the plan room does what they ask (imported inside the
commands, so that `servetune --help` stays fast)."""

from __future__ import annotations

import typer

from servetune.cli.model_options import PASSTHROUGH, model_options
from servetune.plan.args import PlanArgs, PlanSeedsArgs


def plan(args: PlanArgs) -> None:
    """Plan a vLLM deployment: does it fit, how many requests at max_model_len, how fast, which flags.

    Every other option is a `vllm serve` flag by vLLM's own name, e.g. --tensor-parallel-size 2 (-tp 2),
    --max-model-len 128K, --gpu-memory-utilization 0.9, --kv-cache-dtype fp8, --quantization awq,
    --max-num-seqs 256, --max-num-batched-tokens 8192, --enable-prefix-caching / --no-enable-prefix-caching,
    --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}', --language-model-only,
    --enforce-eager, --block-size, --kv-cache-memory-bytes, --dtype. Flags the planner does not model are
    carried into the emitted command line.
    """
    from servetune.plan.command import run_plan

    run_plan(args)


def plan_seeds(args: PlanSeedsArgs) -> None:
    """Plan the five seed systems from the field reports (bundled configs, no download, no GPU)."""
    from servetune.plan.demo import run_demo

    run_demo(detail=args.detail, as_json=args.as_json)


def register(app: typer.Typer) -> None:
    """Adds `plan` and `plan-seeds`."""
    app.command("plan", context_settings=PASSTHROUGH)(model_options(PlanArgs)(plan))
    app.command("plan-seeds")(model_options(PlanSeedsArgs)(plan_seeds))
