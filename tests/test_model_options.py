"""Typer options generated from a pydantic model (`servetune.cli.model_options`): the model alone holds each
flag's name, default, help, unit and bound, and the command gets the validated model."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Literal

import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

from servetune.cli.model_options import PASSTHROUGH, ModelCommand, model_options
from servetune.errors import ServetuneError


class Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path | None = Field(None, description="Where", json_schema_extra={"argument": True})
    period_s: float = Field(5.0, gt=0, allow_inf_nan=False, description="Time between probes")
    count: int = Field(2, ge=1, le=9, description="How many")
    port: int | None = Field(None, ge=1, description="Port", json_schema_extra={"flags": ["--listen"]})
    loud: bool = Field(False, description="Say more")


class WithModel(Args):
    inner: Args | None = None


app = typer.Typer()


@app.command()
@model_options(Args)
def run(args: Args) -> None:
    typer.echo(json.dumps({"args": args.model_dump(mode="json"), "typed": sorted(args.model_fields_set)}))


def _run(*argv: str) -> dict:
    result = CliRunner().invoke(app, list(argv), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_defaults_come_from_the_model_and_only_typed_values_are_set() -> None:
    assert _run() == {
        "args": {"path": None, "period_s": 5.0, "count": 2, "port": None, "loud": False},
        "typed": [],
    }
    got = _run("x", "--period", "0.5", "--listen", "8080", "--loud")
    assert got["args"] == {"path": "x", "period_s": 0.5, "count": 2, "port": 8080, "loud": True}
    assert got["typed"] == ["loud", "path", "period_s", "port"]


def test_the_help_says_each_unit_bound_and_default() -> None:
    text = " ".join(CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output.split())
    assert "--period NUMBER Time between probes; seconds, > 0. [default: 5.0]" in text
    assert "How many; ≥ 1, ≤ 9. [default: 2]" in text
    assert "--listen" in text and "--port" not in text and "--loud" in text and "--no-loud" not in text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--period", "-1"], "--period: input should be greater than 0 (got '-1')"),
        (["--period", "inf"], "--period: input should be a finite number"),
        (["--count", "10"], "--count: input should be less than or equal to 9 (got '10')"),
        (["--count", "two"], "--count: input should be a valid integer"),
        (["--listen", "0"], "--listen: input should be greater than or equal to 1"),
    ],
)
def test_a_value_out_of_bounds_is_a_servetune_error_naming_the_flag(argv: list[str], said: str) -> None:
    with pytest.raises(ServetuneError) as info:
        CliRunner().invoke(app, argv, catch_exceptions=False)
    assert str(info.value).startswith(said) and info.value.fix


def test_a_field_with_no_command_line_form_must_be_excluded() -> None:
    def command(args: WithModel) -> None: ...

    with pytest.raises(TypeError, match="inner"):
        model_options(WithModel)(command)
    model_options(WithModel, exclude={"inner"})(command)


class Lists(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    target: tuple[str, ...] = Field(("all",), description="Targets")
    levels: tuple[float, ...] | None = Field(None, description="Levels")
    kind: Literal["a", "b"] = Field("a", description="Kind")
    goodput: tuple[str, ...] = Field((), description="SLOs", json_schema_extra={"nargs": "+"})
    note: tuple[str, ...] = Field((), description="Notes", json_schema_extra={"split": False})
    json_out: str | None = Field(
        None, description="JSON", json_schema_extra={"flags": ["--json"], "nargs": "?", "const": "-"}
    )
    progress: bool = Field(True, description="Progress", json_schema_extra={"off": ["--disable-tqdm"]})
    key: str | None = Field(None, description="Key", json_schema_extra={"envvar": "MODEL_OPTIONS_TEST_KEY"})
    rest: tuple[str, ...] = Field((), description="Engine flags", json_schema_extra={"rest": True})


lists = typer.Typer()


@lists.command(cls=ModelCommand, context_settings=PASSTHROUGH)
@model_options(Lists)
def many(args: Lists) -> None:
    typer.echo(json.dumps(args.model_dump(mode="json")))


def _many(*argv: str, env: dict[str, str] | None = None) -> dict:
    result = CliRunner().invoke(lists, list(argv), catch_exceptions=False, env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_list_takes_commas_and_the_flag_repeated_alike() -> None:
    """`deploy --target compose,kubernetes,systemd` was 'unknown target'; a repeated --target kept the last."""
    assert _many()["target"] == ["all"]
    assert _many("--target", "a,b", "--target", "c")["target"] == ["a", "b", "c"]
    assert _many("--levels", "1,2", "--levels", "4")["levels"] == [1.0, 2.0, 4.0]
    assert _many("--note", "x=a,b", "--note", "y")["note"] == ["x=a,b", "y"]
    with pytest.raises(ServetuneError, match="--levels"):
        CliRunner().invoke(lists, ["--levels", "1,x"], catch_exceptions=False)


def test_vllm_word_forms_choices_switch_spellings_and_the_rest() -> None:
    got = _many("--goodput", "ttft:500", "tpot:50", "--json", "--disable-tqdm", "--max-model-len", "4k", "-tp", "2")
    assert got["goodput"] == ["ttft:500", "tpot:50"] and got["json_out"] == "-" and got["progress"] is False
    assert got["rest"] == ["--max-model-len", "4k", "-tp", "2"]
    assert _many("--json", "out.json")["json_out"] == "out.json"
    assert _many("--kind", "b", env={"MODEL_OPTIONS_TEST_KEY": "k"})["key"] == "k"
    with pytest.raises(ServetuneError, match="--kind: input should be 'a' or 'b'"):
        CliRunner().invoke(lists, ["--kind", "c"], catch_exceptions=False)
    text = " ".join(CliRunner().invoke(lists, ["--help"], env={"COLUMNS": "200"}).output.split())
    assert "Kind; one of a, b. [default: a]" in text and "a,b or the flag repeated" in text


def test_every_command_lists_each_option_with_its_help_and_every_number_with_a_bound() -> None:
    """`servetune COMMAND --help` says what each option is, and every number's bound; the defaults are the
    models' own (typer shows them)."""
    from typer.core import TyperOption

    from servetune.cli.entry import app as servetune

    commands = typer.main.get_command(servetune).commands  # type: ignore[attr-defined]
    missing = []
    for name, command in sorted(commands.items()):
        for param in command.params:
            if not isinstance(param, TyperOption) or param.name == "help":
                continue
            text = param.help or ""
            annotation = param.type_descriptor.annotation
            kinds = {annotation, *typing.get_args(annotation)}
            numeric = any(kind in (param.metavar or "") for kind in ("INTEGER", "NUMBER")) or bool(kinds & {int, float})
            if not text.strip() or (numeric and not any(sign in text for sign in "≥≤<>")):
                missing.append(f"{name} {param.opts[0]}: {text!r}")
    assert missing == []
