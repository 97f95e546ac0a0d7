"""One translation of a pydantic error into what a user reads: the key or flag, the value, what is wrong, the fix."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from servetune.errors import ServetuneError, from_validation_error


class Options(BaseModel):
    max_num_seqs: int = Field(1, ge=1)
    name: str = "x"


def error_of(**values: object) -> ValidationError:
    with pytest.raises(ValidationError) as err:
        Options(**values)
    return err.value


def test_names_the_flag_the_value_and_the_fix() -> None:
    told = from_validation_error(error_of(max_num_seqs=0), name=lambda f: "--" + f.replace("_", "-"))
    assert isinstance(told, ServetuneError)
    assert told.problem == "--max-num-seqs: input should be greater than or equal to 1 (got 0)"
    assert told.fix == "--max-num-seqs: use a value that is greater than or equal to 1"


def test_where_and_a_given_fix() -> None:
    told = from_validation_error(error_of(max_num_seqs="abc"), where="serve.yaml", fix="see the docs")
    assert (
        told.problem.startswith("serve.yaml: max_num_seqs: input should be a valid integer") and "'abc'" in told.problem
    )
    assert told.fix == "see the docs"
    by_key = from_validation_error(error_of(name=[1]), fix=lambda key: f"{key}: the variant's name")
    assert by_key.fix == "name: write text (quote it if it looks like a number) (name: the variant's name)"
    assert "(got" not in by_key.problem  # a list is not repeated in the message
    long = from_validation_error(error_of(max_num_seqs="x" * 500))
    assert len(long.problem) < 200


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["estimate", "qwen3.6-27b", "--max-num-seqs", "0", "--concurrency", "1"], "--max-num-seqs"),
        (["estimate", "qwen3.6-27b", "--concurrency", "abc"], "--concurrency: input should be a valid integer"),
        (["estimate", "qwen3.6-27b", "--time-scale", "0", "--concurrency", "1"], "--time-scale"),
    ],
)
def test_the_commands_say_it_the_same_way(words: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    from servetune.cli import main

    with pytest.raises(SystemExit) as done:
        main(words)
    err = capsys.readouterr().err
    assert done.value.code == 2 and says in err and "fix: " in err and "unexpectedly" not in err, err
