"""CLI of the operate room: `serve` (supervised engine behind nginx; `--switch NEW` for blue-green)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from servetune.cli.engine import PASSTHROUGH
from servetune.errors import ServetuneError

if TYPE_CHECKING:  # the CLI imports its rooms lazily (fast --help); the types are for mypy
    from servetune.engines.config import EngineConfig
    from servetune.operate.evidence import Evidence
    from servetune.operate.fallback import Fallback
    from servetune.operate.source import Source


def _source(source: Path | None, engine: str | None, model: str | None, served: str | None, extra: list[str]) -> Source:
    """A tuning folder / config file, or a config from the command line (`--engine E --model M -- flags`)."""
    from servetune.engines.config import EngineConfig
    from servetune.operate.evidence import Evidence
    from servetune.operate.source import Source, load_source

    if source is not None:
        if engine or model or extra:
            raise ServetuneError(
                "give either a tuning folder / config file, or --engine/--model with flags, not both",
                "drop the positional SOURCE or the --engine/--model options",
            )
        return load_source(source)
    if not model:
        raise ServetuneError(
            "nothing to serve", "pass a tuning folder, an engine config file, or --engine E --model M -- FLAGS"
        )
    from servetune.engines.models import resolve_model
    from servetune.engines.vocab import parse_argv

    kind = engine or "vllm"
    cfg = EngineConfig(engine=kind, model=model, served_model_name=served, flags=parse_argv(kind, extra))  # type: ignore[arg-type]
    return Source(cfg=resolve_model(cfg), evidence=Evidence(origin="command line"))


def _fallback(
    path: Path | None, cfg: EngineConfig, gpu: str | None, gpus: int | None, evidence: Evidence
) -> Fallback | None:
    from servetune.operate.fallback import given_fallback, plan_fallback

    if path is not None:
        from servetune.operate.source import load_source

        return given_fallback(load_source(path).cfg, str(path))
    gpu_name = gpu or evidence.gpu
    if cfg.engine != "vllm" or not gpu_name:
        return None
    from servetune.hardware.catalog import get_gpu

    return plan_fallback(cfg, get_gpu(gpu_name), gpus or evidence.gpu_count)


def register(app: typer.Typer) -> None:
    """Adds `serve`."""

    @app.command("serve", context_settings=PASSTHROUGH)
    def serve_cmd(
        ctx: typer.Context,
        source: Path = typer.Argument(None, help="Tuning folder (serves its winner) or engine config file."),
        engine: str = typer.Option(None, "--engine", help="vllm or llamacpp, with --model and flags after --."),
        model: str = typer.Option(None, "--model", help="Model path ('tiny' = servetune's tiny test model)."),
        served_model_name: str = typer.Option(None, "--served-model-name"),
        run_dir: Path = typer.Option(Path("runs/serve"), "--run-dir", help="Event log, nginx, engine logs."),
        port: int = typer.Option(None, "--port", help="Proxy port on 127.0.0.1 (default: a free one)."),
        control_port: int = typer.Option(None, "--control-port", help="Supervisor metrics/control port."),
        switch: Path = typer.Option(None, "--switch", help="Blue-green switch the running serve to this config."),
        fallback: Path = typer.Option(None, "--fallback", help="Fallback profile after a crash loop (config)."),
        gpu: str = typer.Option(None, "--gpu", help="GPU type, for the planned fallback (vLLM)."),
        gpus: int = typer.Option(None, "--gpus", min=1, help="GPUs the config runs on (planned fallback)."),
        long: Path = typer.Option(None, "--long", help="Engine config of the dedicated long-prompt upstream."),
        long_prompt_tokens: int = typer.Option(None, "--long-prompt-tokens", min=1, help="Long-prompt threshold."),
        liveness_period: float = typer.Option(5.0, "--liveness-period", help="Seconds between liveness probes."),
        liveness_deadline: float = typer.Option(None, "--liveness-deadline", help="Seconds (default: measured)."),
        liveness_failures: int = typer.Option(2, "--liveness-failures", help="Misses in a row that mean hung."),
        crash_loop: int = typer.Option(3, "--crash-loop", help="Failures within --crash-window → fallback."),
        crash_window: float = typer.Option(300.0, "--crash-window", help="Seconds."),
        backoff_base: float = typer.Option(1.0, "--backoff-base", help="First restart delay (doubles)."),
        backoff_max: float = typer.Option(60.0, "--backoff-max", help="Longest restart delay."),
        drain: float = typer.Option(30.0, "--drain", help="Seconds in-flight streams get on SIGTERM/switch."),
        startup_timeout: float = typer.Option(None, "--startup-timeout", help="Seconds (default: measured)."),
        accept_long_tokens: int = typer.Option(None, "--accept-long-tokens", help="0 skips the long step."),
        read_timeout: float = typer.Option(None, "--read-timeout", help="nginx read timeout (default: measured)."),
    ) -> None:
        """Serve a config under supervision behind nginx until SIGTERM/Ctrl-C (drains in-flight streams)."""
        from servetune.operate.sizing import Sized, serve_sizing
        from servetune.operate.supervisor import ServeOptions, Supervisor

        extra = list(ctx.args)
        given_source: Path | None = source
        if source is not None and str(source).startswith("-"):  # `serve --engine E --model M -- --flag ...`
            given_source, extra = None, [str(source), *extra]
        src = _source(given_source, engine, model, served_model_name, extra)
        if switch is not None:
            from servetune.operate.control import request_switch
            from servetune.operate.source import load_source

            new = load_source(switch).cfg
            result = request_switch(run_dir, new, timeout_s=(startup_timeout or 600.0) + drain + 120)
            typer.echo(
                f"switched in {result['total_s']:.1f} s (start {result['start_s']:.1f} s, reload "
                f"{result['reload_s'] * 1000:.0f} ms, drain {result['drain_s']:.1f} s): {result['green_url']}"
            )
            return
        sized = serve_sizing(src.evidence)

        def given(value: float | None, name: str, fallback_value: Sized | None) -> Sized | None:
            return Sized(value=value, source=f"--{name}") if value is not None else fallback_value

        values = {
            "run_dir": run_dir,
            "listen_port": port,
            "control_port": control_port,
            "startup_timeout_s": given(startup_timeout, "startup-timeout", sized.startup_timeout_s),
            "liveness_period_s": liveness_period,
            "liveness_deadline_s": given(liveness_deadline, "liveness-deadline", sized.liveness_deadline_s),
            "liveness_failures": liveness_failures,
            "backoff_base_s": backoff_base,
            "backoff_max_s": backoff_max,
            "crash_loop_failures": crash_loop,
            "crash_loop_window_s": crash_window,
            "drain_s": drain,
            "accept_long_tokens": accept_long_tokens,
            "long_prompt_tokens": long_prompt_tokens,
            "read_timeout": given(read_timeout, "read-timeout", sized.read_timeout),
            "body_bytes": sized.body_bytes,
        }
        options = ServeOptions.build(**{k: v for k, v in values.items() if v is not None})
        from servetune.operate.source import load_source

        long_cfg = load_source(long).cfg if long is not None else None
        sup = Supervisor(
            src.cfg,
            options,
            fallback=_fallback(fallback, src.cfg, gpu, gpus, src.evidence),
            long_cfg=long_cfg,
            origin=src.evidence.origin,
        )
        typer.echo(f"servetune serve: {src.evidence.origin}; events in {run_dir / 'events.jsonl'}", err=True)
        raise typer.Exit(sup.run())
