"""Typer options generated from a pydantic model (`servetune.cli.model_options`): the model alone holds each
flag's name, default, help, unit and bound, and the command gets the validated model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

from servetune.cli.model_options import model_options
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
    assert "--period <float> Time between probes; seconds, > 0. [default: 5.0]" in text
    assert "How many; ≥ 1, ≤ 9. [default: 2]" in text
    assert "--listen" in text and "--port" not in text and "--loud" in text and "--no-loud" in text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--period", "-1"], "--period: input should be greater than 0 (got -1.0)"),
        (["--period", "inf"], "--period: input should be a finite number"),
        (["--count", "10"], "--count: input should be less than or equal to 9 (got 10)"),
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
