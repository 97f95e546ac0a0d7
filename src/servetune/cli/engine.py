"""CLI of the engines room: `tiny-model`, `launch` (serve until Ctrl-C) and `check` (acceptance test).

Engine flags come after the known options, by the engine's own names (`--max-model-len 4096`, `-tp 2`,
`--ctx-size=8192`), read by the engine vocabulary: a flag the engine's table lacks is an error with a suggestion,
unless `--pass-unknown-flags` says to pass it on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from servetune.errors import ServetuneError

if TYPE_CHECKING:  # the CLI imports its rooms lazily (fast --help); the types are for mypy
    from servetune.engines.config import EngineConfig
    from servetune.engines.launch import RunningEngine
    from servetune.suite.result import ProbeResult

PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def _config(
    engine: str, model: str | None, served: str | None, tiny: bool, extra: list[str], unknown: bool
) -> EngineConfig:
    from servetune.engines.config import EngineConfig
    from servetune.engines.registry import adapter_for
    from servetune.engines.vocab import parse_argv

    adapter_for(engine)  # an unknown engine is an error naming the ones there are, before anything else

    if tiny:
        from servetune.tiny.cache import tiny_model

        built = tiny_model()
        model = str(built.gguf_path if engine == "llamacpp" else built.hf_dir)
        served = served or built.served_name
    if not model:
        raise ServetuneError("no model given", "pass --model PATH (or --tiny for servetune's tiny test model)")
    return EngineConfig(
        engine=engine,  # type: ignore[arg-type]
        model=model,
        served_model_name=served,
        flags=parse_argv(engine, extra, allow_unknown=unknown),
    )


def _launch(cfg: EngineConfig, log_dir: Path, timeout: float, port: int | None, host: str) -> RunningEngine:
    from rich.console import Console
    from rich.markup import escape

    from servetune.engines.launch import launch

    console = Console(stderr=True)
    console.print(f"[bold]launching[/] {cfg.engine} {cfg.model} (logs in {log_dir})")
    return launch(
        cfg,
        log_dir=log_dir,
        startup_timeout_s=timeout,
        host=host,
        port=port,
        on_progress=lambda msg: console.print(f"  [dim]{escape(msg)}[/]", highlight=False),
    )


def _print_check(result: ProbeResult, base_url: str, model: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"servetune check: {model} at {base_url}")
    for col in ("step", "result", "detail"):
        table.add_column(col)
    for note in result.notes:
        verdict, _, rest = note.partition(" ")
        step, _, detail = rest.partition(": ")
        colour = {"PASS": "green", "FAIL": "red"}.get(verdict, "yellow")
        table.add_row(step, f"[{colour}]{verdict}[/]", detail)
    console = Console()
    console.print(table)
    passed = result.figures.get("passed") == 1.0
    console.print("[bold green]PASS[/]" if passed else "[bold red]FAIL[/]")


def _acceptance(
    base_url: str, model: str, long_context: int | None, api_key: str | None, timeout: float
) -> tuple[ProbeResult, str]:
    from servetune.control.client import normalize_base_url
    from servetune.process.interrupts import run_coroutine
    from servetune.suite.check import check_server

    result = run_coroutine(
        check_server(
            base_url, model, long_context_tokens=long_context, api_key=api_key, timeout_s=timeout, total_s=timeout
        )
    )
    return result, normalize_base_url(base_url)


def register(app: typer.Typer) -> None:
    """Adds `tiny-model`, `launch` and `check`."""

    @app.command("tiny-model")
    def tiny_model(out_dir: Path = typer.Argument(..., help="Directory to build the tiny model in.")) -> None:
        """Build servetune's tiny random Llama (HF files for vLLM + GGUF for llama.cpp); cached per directory."""
        from servetune.tiny.build import build_tiny_model

        m = build_tiny_model(out_dir)
        typer.echo(f"hf:   {m.hf_dir}\ngguf: {m.gguf_path}\nname: {m.served_name} (vocab {m.vocab_size})")

    @app.command("launch", context_settings=PASSTHROUGH)
    def launch_cmd(
        ctx: typer.Context,
        engine: str = typer.Option("vllm", "--engine", help="vllm, llamacpp, sglang or sim."),
        model: str = typer.Option(None, "--model", help="Model path or id as the engine takes it."),
        served_model_name: str = typer.Option(None, "--served-model-name"),
        tiny: bool = typer.Option(False, "--tiny", help="Serve servetune's tiny random model."),
        port: int = typer.Option(None, "--port", help="Port (default: a free one)."),
        host: str = typer.Option("127.0.0.1", "--host"),
        startup_timeout: float = typer.Option(600.0, "--startup-timeout", help="Seconds to wait for ready."),
        log_dir: Path = typer.Option(Path("runs/logs"), "--log-dir"),
        pass_unknown: bool = typer.Option(
            False, "--pass-unknown-flags", help="Pass flags missing from servetune's tables on to the engine."
        ),
    ) -> None:
        """Start an engine (engine flags follow, by the engine's own names) and keep it up until Ctrl-C."""
        import time

        cfg = _config(engine, model, served_model_name, tiny, list(ctx.args), pass_unknown)
        engine_ = _launch(cfg, log_dir, startup_timeout, port, host)
        try:  # from the moment it is ready: a Ctrl-C at any point after this still stops it and reports
            typer.echo(f"ready in {engine_.startup_s:.1f} s: {engine_.base_url}/v1 serves {engine_.model_name!r}")
            typer.echo(engine_.facts.model_dump_json(exclude_none=True, indent=2))
            typer.echo("Ctrl-C to stop")
            while engine_.alive():
                time.sleep(0.5)
            death = engine_.classify_death()
            if death:
                typer.secho(f"engine died: {death.klass}\n{death.excerpt}\n  fix: {death.hint}", fg="red", err=True)
                raise typer.Exit(1)
        except KeyboardInterrupt:
            pass
        finally:
            report = engine_.stop()
            if report:
                typer.echo(f"stopped in {report.seconds:.2f} s; processes left: {report.survivors or 'none'}")

    @app.command("check", context_settings=PASSTHROUGH)
    def check_cmd(
        ctx: typer.Context,
        url: str = typer.Option(None, "--url", help="Check a running server (base URL) instead of launching."),
        engine: str = typer.Option("vllm", "--engine", help="Engine to launch when no --url is given."),
        model: str = typer.Option(None, "--model", help="Served model name (with --url) or model path."),
        served_model_name: str = typer.Option(None, "--served-model-name"),
        tiny: bool = typer.Option(False, "--tiny", help="Launch servetune's tiny random model."),
        long_context: int = typer.Option(
            None, "--long-context", min=16, help="Prompt tokens of the long request (at least 16)."
        ),
        api_key: str = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY"),
        timeout: float = typer.Option(
            120.0,
            "--timeout",
            min=0.001,
            help="Seconds the whole check may take, every request in it (a launch has --startup-timeout).",
        ),
        startup_timeout: float = typer.Option(600.0, "--startup-timeout"),
        log_dir: Path = typer.Option(Path("runs/logs"), "--log-dir"),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of a table."),
        pass_unknown: bool = typer.Option(
            False, "--pass-unknown-flags", help="Pass flags missing from servetune's tables on to the engine."
        ),
    ) -> None:
        """Acceptance test (the suite's acceptance probe): the model is served (with max_model_len), a short chat
        answers, a long prompt completes. Launches the engine first unless --url is given; exit code 1 when a step
        fails."""
        if url:
            if not model:
                raise ServetuneError("--url needs --model (the served model name)", "add --model NAME")
            result, base_url = _acceptance(url, model, long_context, api_key, timeout)
            name = model
        else:
            cfg = _config(engine, model, served_model_name, tiny, list(ctx.args), pass_unknown)
            with _launch(cfg, log_dir, startup_timeout, None, "127.0.0.1") as running:
                result, base_url = _acceptance(running.base_url, running.model_name, long_context, None, timeout)
                name = running.model_name
        if as_json:
            typer.echo(result.model_dump_json(indent=2))
        else:
            _print_check(result, base_url, name)
        from servetune.suite.check import passed

        if not passed(result):
            raise typer.Exit(1)
