"""CLI of the engines room: `tiny-model`, `launch` (serve until Ctrl-C) and `check` (acceptance test). Their
options are `engines/args.py`'s and `suite/check_args.py`'s models; engine flags come after the known options,
by the engine's own names (`--max-model-len 4096`, `-tp 2`, `--ctx-size=8192`), read by the engine vocabulary: a
flag the engine's table lacks is an error with a suggestion, unless `--pass-unknown-flags` says to pass it on."""

from __future__ import annotations

import typer

from servetune.cli.model_options import PASSTHROUGH, model_options
from servetune.engines.args import LaunchArgs, TinyModelArgs
from servetune.suite.check_args import CheckArgs


def tiny_model(args: TinyModelArgs) -> None:
    """Build servetune's tiny random Llama (HF files for vLLM + GGUF for llama.cpp); cached per directory."""
    from servetune.tiny.build import build_tiny_model

    m = build_tiny_model(args.out_dir)
    typer.echo(f"hf:   {m.hf_dir}\ngguf: {m.gguf_path}\nname: {m.served_name} (vocab {m.vocab_size})")


def launch(args: LaunchArgs) -> None:
    """Start an engine (engine flags follow, by the engine's own names) and keep it up until Ctrl-C."""
    from servetune.engines.foreground import run_launch

    raise typer.Exit(run_launch(args))


def check(args: CheckArgs) -> None:
    """Acceptance test (the suite's acceptance probe): the model is served (with max_model_len), a short chat
    answers, a long prompt completes. Launches the engine first unless --url is given; exit code 1 when a step
    fails."""
    from servetune.suite.check import run_check

    raise typer.Exit(run_check(args))


def register(app: typer.Typer) -> None:
    """Adds `tiny-model`, `launch` and `check`."""
    app.command("tiny-model")(model_options(TinyModelArgs)(tiny_model))
    app.command("launch", context_settings=PASSTHROUGH)(model_options(LaunchArgs)(launch))
    app.command("check", context_settings=PASSTHROUGH)(model_options(CheckArgs)(check))
