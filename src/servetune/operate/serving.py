"""`servetune serve` as one call, `serve(args, engine_argv, say)`: it either asks a running serve to switch
(`--switch NEW`), or finds what to serve, sizes the supervision from the source's measurements and supervises it
until SIGTERM. Everything a person needs to see is told through `say` (the terminal)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.operate.capacity import DeviceChoice
from servetune.operate.evidence import Evidence
from servetune.operate.fallback import Fallback
from servetune.operate.serve_options import SWITCH_ONLY, WHAT_TO_SERVE, ServeArgs
from servetune.operate.source import Source, load_source

Say = Callable[[str], None]


def serve(args: ServeArgs, engine_argv: list[str], say: Say) -> int:
    """Runs `servetune serve`; returns its exit code (a bad input is a ServetuneError)."""
    source, extra = args.source, list(engine_argv)
    if source is not None and str(source).startswith("-"):  # `serve --engine E --model M -- --flag ...`
        source, extra = None, [str(source), *extra]
    if args.switch is not None:
        return _switch(args, args.switch, source, extra, say)
    asked = sorted(f"--{n.replace('_', '-')}" for n in args.model_fields_set & (SWITCH_ONLY - {"switch"}))
    if asked:
        raise ServetuneError(
            f"{', '.join(asked)} belong(s) to a switch", "add --switch NEW (and the --run-dir of the running serve)"
        )
    src = _source(source, args.engine, args.model, args.served_model_name, extra)
    options = args.options(src.evidence)
    long_cfg = load_source(args.long).cfg if args.long is not None else None
    from servetune.operate.supervisor import Supervisor

    choice = DeviceChoice(
        gpu=args.gpu or src.evidence.gpu,
        gpus=args.gpus or (src.evidence.gpu_count if src.evidence.gpu else None),
        limit_gib=options.memory_limit_gib,
    )
    fallback = _fallback(args.fallback, src.cfg, args.gpu, args.gpus, src.evidence)
    if fallback is not None:
        _check_fallback(fallback, choice)
    sup = Supervisor(
        src.cfg,
        options,
        fallback=fallback,
        long_cfg=long_cfg,
        origin=src.evidence.origin,
        say=say,
        device=choice,
        measured_cold=src.evidence.cold_start(),
    )
    say(f"servetune serve: {src.evidence.origin}; events in {options.run_dir / 'events.jsonl'}")
    return sup.run()


def _switch(args: ServeArgs, new: Path, source: Path | None, extra: list[str], say: Say) -> int:
    """`serve --run-dir DIR --switch NEW`: the running serve switches; this process only asks and reports."""
    given = sorted(f"--{name.replace('_', '-')}" for name in args.model_fields_set & WHAT_TO_SERVE - {"source"})
    if source is not None or extra or given:
        what = ", ".join([*(["SOURCE"] if source is not None else []), *given, *(["engine flags"] if extra else [])])
        raise ServetuneError(
            f"--switch asks the serve running in {args.run_dir} to switch; it takes no {what}",
            "give only --run-dir and --switch NEW (a config file or tuning folder)",
        )
    from servetune.operate.control import request_switch

    cfg = load_source(new).cfg
    what = "the plan of a switch" if args.check else "to switch"
    say(f"asking the serve in {args.run_dir} for {what} to {new}")
    result = request_switch(args.run_dir, cfg, check=args.check, max_unavailable_s=args.max_unavailable_s)
    for line in result.get("lines") or []:
        say(str(line))
    if args.check or result.get("refused"):
        return 0 if result.get("proceeds") else 1
    if result.get("decision") == "drain_and_replace":
        say(
            f"switched by drain and replace in {result['total_s']:.1f} s: no engine served for "
            f"{result['unavailable_s']:.1f} s (expected about {result.get('expected_s') or 0:.0f} s, at most "
            f"{result.get('bound_s') or 0:.0f} s): {result['green_url']}"
        )
        return 0
    say(
        f"switched in {result['total_s']:.1f} s (start {result['start_s']:.1f} s, reload "
        f"{result['reload_s'] * 1000:.0f} ms, drain {result['drain_s']:.1f} s): {result['green_url']}"
    )
    return 0


def _source(source: Path | None, engine: str | None, model: str | None, served: str | None, extra: list[str]) -> Source:
    """A tuning folder / config file, or a config from the command line (`--engine E --model M -- flags`)."""
    if source is not None:
        if engine or model or extra:
            raise ServetuneError(
                "give either a tuning folder / config file, or --engine/--model with flags, not both",
                "drop the positional SOURCE or the --engine/--model options",
            )
        return load_source(source)
    if not model:
        raise ServetuneError(
            "nothing to serve",
            "pass a tuning folder, an engine config file, or --engine E --model M -- FLAGS "
            "(or --run-dir DIR --switch NEW to switch a running serve)",
        )
    from servetune.engines.models import resolve_model
    from servetune.engines.vocab import parse_argv

    kind = engine or "vllm"
    flags = parse_argv(kind, extra)  # an unknown engine is a ServetuneError here
    cfg = EngineConfig(engine=kind, model=model, served_model_name=served, flags=flags)  # type: ignore[arg-type]
    return Source(cfg=resolve_model(cfg), evidence=Evidence(origin="command line"))


def _check_fallback(fallback: Fallback, choice: DeviceChoice) -> None:
    """The fallback must fit on what it falls back to: alone on the device (with none of serve's other engines
    yet), by the same rule a restart is planned by; refused before anything starts otherwise."""
    from servetune.operate.capacity import plan_start

    verdict = plan_start(fallback.cfg, [], choice)
    if verdict.decision == "refuse":
        raise ServetuneError(
            f"the fallback profile ({fallback.how}) cannot run: {verdict.reason}",
            "give a smaller fallback (--fallback FILE: a lower gpu-memory-utilization, a shorter max-model-len, a "
            "smaller KV space), or a larger --memory-limit-gib",
        )


def _fallback(
    path: Path | None, cfg: EngineConfig, gpu: str | None, gpus: int | None, evidence: Evidence
) -> Fallback | None:
    from servetune.operate.fallback import given_fallback, plan_fallback

    if path is not None:
        return given_fallback(load_source(path).cfg, str(path))
    gpu_name = gpu or evidence.gpu
    if cfg.engine != "vllm" or not gpu_name:
        return None
    from servetune.hardware.catalog import get_gpu

    return plan_fallback(cfg, get_gpu(gpu_name), gpus or evidence.gpu_count)
