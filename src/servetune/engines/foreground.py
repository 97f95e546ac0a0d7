"""What `servetune launch` does with its arguments (`engines/args.py` `LaunchArgs`): start the engine, say where
it serves and what it decided, keep it up until Ctrl-C (or its death, classified), and stop it with its teardown
report. `start` is the launch with its progress on standard error, which `servetune check` shares."""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape

from servetune.engines.args import EngineArgs, LaunchArgs
from servetune.engines.launch import RunningEngine, launch


def start(args: EngineArgs, *, port: int | None = None, host: str = "127.0.0.1") -> RunningEngine:
    """Launches the engine `args` name, its progress said on standard error."""
    cfg = args.config()
    console = Console(stderr=True)
    console.print(f"[bold]launching[/] {cfg.engine} {cfg.model} (logs in {args.log_dir})")
    return launch(
        cfg,
        log_dir=args.log_dir,
        startup_timeout_s=args.startup_timeout_s,
        host=host,
        port=port,
        on_progress=lambda msg: console.print(f"  [dim]{escape(msg)}[/]", highlight=False),
    )


def run_launch(args: LaunchArgs) -> int:
    """`servetune launch`: serves until Ctrl-C; the exit code (1 when the engine died on its own)."""
    engine = start(args, port=args.port, host=args.host)
    try:  # from the moment it is ready: a Ctrl-C at any point after this still stops it and reports
        print(f"ready in {engine.startup_s:.1f} s: {engine.base_url}/v1 serves {engine.model_name!r}", flush=True)
        print(engine.facts.model_dump_json(exclude_none=True, indent=2))
        print("Ctrl-C to stop", flush=True)
        while engine.alive():
            time.sleep(0.5)
        death = engine.classify_death()
        if death:
            Console(stderr=True).print(
                f"[red]engine died: {escape(death.klass)}\n{escape(death.excerpt)}\n  fix: {escape(death.hint)}[/]"
            )
            return 1
    except KeyboardInterrupt:
        pass
    finally:
        report = engine.stop()
        if report:
            print(f"stopped in {report.seconds:.2f} s; processes left: {report.survivors or 'none'}", flush=True)
    return 0
