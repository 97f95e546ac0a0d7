"""The engine vocabulary: argv ↔ typed flags for every kind, engine and spelling, with clear errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from servetune.engines.flagtable import FlagSpec, table_for
from servetune.engines.vocab import coerce, human_readable_int, normalize_flags, parse_argv, to_argv
from servetune.errors import ServetuneError

# ---------------------------------------------------------------------------------------- human-readable ints


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1k", 1000),
        ("1K", 1024),
        ("128k", 128_000),
        ("128K", 131_072),
        ("25.6k", 25_600),
        ("2m", 2_000_000),
        ("2M", 2 * 2**20),
        ("1g", 10**9),
        ("1G", 2**30),
        ("32768", 32768),
        (" 32768 ", 32768),
        ("-1", -1),
        (4096, 4096),
        (4096.0, 4096),
    ],
)
def test_human_readable_int_reads_like_vllm(text, value):
    assert human_readable_int(text, "max-model-len") == value


@pytest.mark.parametrize("text", ["1.5K", "12x", "k", "", "1.5", "1e3", True, 1.5, math.nan, [1]])
def test_human_readable_int_rejects_what_vllm_rejects(text):
    with pytest.raises(ServetuneError) as err:
        human_readable_int(text, "max-model-len")
    assert "--max-model-len" in str(err.value)


def test_one_k_is_a_thousand_and_one_capital_k_is_1024_everywhere():
    """Issue 9: tune's `_flag_len` read 1k as 1024; vLLM reads 1000 (1K is 1024)."""
    assert parse_argv("vllm", ["--max-model-len", "1k"]) == {"max-model-len": 1000}
    assert parse_argv("vllm", ["--max-model-len", "1K"]) == {"max-model-len": 1024}
    assert normalize_flags("vllm", {"max-model-len": "1k"}) == {"max-model-len": 1000}
    assert normalize_flags("sim", {"max_model_len": "1K"}) == {"max-model-len": 1024}


def test_sglang_counts_use_sglangs_own_suffixes():
    assert normalize_flags("sglang", {"context-length": "1k"}) == {"context-length": 1000}
    assert normalize_flags("sglang", {"context-length": "1M"}) == {"context-length": 10**6}
    assert normalize_flags("sglang", {"context-length": "128Ki"}) == {"context-length": 131072}
    with pytest.raises(ServetuneError, match="SI suffixes"):
        normalize_flags("sglang", {"context-length": "1.5Ki"})
    with pytest.raises(ServetuneError, match="context-length"):
        normalize_flags("sglang", {"context-length": "1K"})  # SGLang is case-sensitive: K is not a suffix


# ---------------------------------------------------------------------------------------------- parse_argv


def test_parse_argv_every_spelling():
    argv = [
        "--max-model-len", "128K",
        "-tp", "2",
        "--gpu-memory-utilization=0.9",
        "--enable-prefix-caching",
        "--no-enforce-eager",
        "--max_num_seqs", "64",
        "--kv-cache-dtype", "fp8",
        "--seed", "-1",
    ]  # fmt: skip
    assert parse_argv("vllm", argv) == {
        "max-model-len": 131072,
        "tensor-parallel-size": 2,
        "gpu-memory-utilization": 0.9,
        "enable-prefix-caching": True,
        "enforce-eager": False,
        "max-num-seqs": 64,
        "kv-cache-dtype": "fp8",
        "seed": -1,
    }


def test_parse_argv_json_list_append_and_dotted_values():
    argv = [
        "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}',
        "--compilation-config.mode", "3",
        "--compilation-config.cudagraph_capture_sizes+", "1,2",
        "--additional-config", '{"k": [1, 2]}',
        "--hf-overrides", "some-name",
        "--served-model-name", "a", "b",
        "--middleware", "m1", "--middleware", "m2",
        "--cudagraph-capture-sizes", "1", "2", "4",
        "-O3",
    ]  # fmt: skip
    assert parse_argv("vllm", argv) == {
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 2},
        "compilation-config": {"mode": 3, "cudagraph_capture_sizes": ["1", "2"]},
        "additional-config": {"k": [1, 2]},
        "hf-overrides": "some-name",
        "served-model-name": ["a", "b"],
        "middleware": ["m1", "m2"],
        "cudagraph-capture-sizes": [1, 2, 4],
        "optimization-level": "3",
    }


def test_parse_argv_len_auto_and_optional_values():
    assert parse_argv("vllm", ["--max-model-len", "auto"]) == {"max-model-len": -1}
    assert parse_argv("vllm", ["--max-model-len", "-1"]) == {"max-model-len": -1}
    assert parse_argv("vllm", ["--hf-token", "--seed", "3"]) == {"hf-token": True, "seed": 3}
    assert parse_argv("vllm", ["--enable-prefix-caching=false"]) == {"enable-prefix-caching": False}


def test_parse_argv_llamacpp_takes_the_next_word_whatever_it_is():
    argv = ["-c", "4096", "-np", "2", "-nocb", "-fa", "on", "-r", "-stop-", "--control-vector-layer-range", "1", "-3"]
    assert parse_argv("llamacpp", argv) == {
        "ctx-size": 4096,
        "parallel": 2,
        "cont-batching": False,
        "flash-attn": "on",
        "reverse-prompt": ["-stop-"],
        "control-vector-layer-range": ["1", "-3"],
    }
    with pytest.raises(ServetuneError, match="ctx-size"):
        parse_argv("llamacpp", ["--ctx-size", "--parallel", "2"])  # llama.cpp too reads --parallel as the value


def test_parse_argv_sglang_and_sim():
    assert parse_argv("sglang", ["--tp-size", "2"]) == {"tp-size": 2}
    assert parse_argv("sglang", ["--tensor-parallel-size", "2", "--disable-radix-cache"]) == {
        "tp-size": 2,
        "disable-radix-cache": True,
    }
    assert parse_argv("sim", ["--gpu", "H200", "--time-scale", "10", "-tp", "2"]) == {
        "gpu": "H200",
        "time-scale": 10.0,
        "tensor-parallel-size": 2,
    }


@pytest.mark.parametrize(
    ("argv", "problem", "fix"),
    [
        (["--max-model-lenn", "3"], "--max-model-lenn is not a vLLM 0.32.0 flag", "--max-model-len"),
        (["--enable-prefix-cache"], "not a vLLM", "--enable-prefix-caching"),
        (["--disable-log-requests"], "it is one of 0.11.2", "allow_unknown_flags"),
        (["model-dir"], "unexpected word 'model-dir'", "--name value"),
        (["--enforce-eager", "yes-please"], "--enforce-eager takes no value", "--name value"),
        (["--max-model-len"], "needs a value", "auto / -1"),
        (["--max-model-len", "1.5K"], "decimals only", "1.5k"),
        (["--max-model-len", "big"], "not a token count", "128K = 131072"),
        (["--tensor-parallel-size", "two"], "not a whole number", "a whole number"),
        (["--gpu-memory-utilization", "nan"], "not a finite number", "a finite number"),
        (["--gpu-memory-utilization", "inf"], "not a finite number", "--gpu-memory-utilization"),
        (["--kv-cache-dtype", "fp9"], "not one of its choices", "fp8"),
        (["--speculative-config", "{method: mtp}"], "--speculative-config is not valid JSON", "JSON object"),
        (["--speculative-config", "3"], "not an object or list", "JSON object"),
        (["--no-enforce-eager=1"], "takes no value", "--enforce-eager=false"),
        (["--seed", "1", "--seed", "2"], "given twice", "once"),
        (["--enable-prefix-caching", "--no-enable-prefix-caching"], "given twice", "once"),
        (["--no-disable-log-stats"], "not a vLLM", "disable-log-stats"),  # a store_true flag has no --no- form
        (["--chat-template", "-x"], "needs a value", "--chat-template=VALUE"),
        (["--seed.x", "1"], "only JSON flags take dotted keys", "--seed VALUE"),
    ],
)
def test_parse_argv_errors_name_the_flag_and_its_form(argv, problem, fix):
    with pytest.raises(ServetuneError) as err:
        parse_argv("vllm", argv)
    assert problem in err.value.problem
    assert err.value.fix is not None and fix in err.value.fix


def test_unknown_flag_error_suggests_and_says_how_to_pass_it():
    """Issue 9: an unknown flag is an error with a suggestion, or passed on by an explicit opt-in."""
    with pytest.raises(ServetuneError) as err:
        parse_argv("vllm", ["--max-num-seq", "8"])
    assert "did you mean --max-num-seqs" in (err.value.fix or "")
    assert "allow_unknown_flags" in (err.value.fix or "")


def test_allow_unknown_keeps_unknown_flags_as_given_and_still_checks_known_ones():
    argv = ["--future-flag", "x", "--no-thing", "--multi", "a", "b", "-z=3", "--max-model-len", "1k"]
    assert parse_argv("vllm", argv, allow_unknown=True) == {
        "future-flag": "x",
        "no-thing": True,
        "multi": ["a", "b"],
        "-z": "3",
        "max-model-len": 1000,
    }
    with pytest.raises(ServetuneError, match="max-model-len"):
        parse_argv("vllm", ["--future-flag", "--max-model-len", "big"], allow_unknown=True)


def test_version_changes_what_is_known():
    assert parse_argv("vllm", ["--disable-log-requests"], version="0.11.2") == {"disable-log-requests": True}
    with pytest.raises(ServetuneError, match=r"0\.32\.0"):
        parse_argv("vllm", ["--disable-log-requests"], version="0.32.0")


# ----------------------------------------------------------------------------------------- normalize_flags


def test_normalize_flags_takes_yaml_as_it_comes():
    flags = {
        "max-model-len": "32k",
        "enable_prefix_caching": False,
        "--tensor-parallel-size": 2,
        "tp_x": None,
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 2},
        "gpu-memory-utilization": 1,
        "kv-cache-dtype": None,
        "no-async-scheduling": True,
        "served-model-name": "one",
        "compilation-config.mode": 3,
    }
    flags.pop("tp_x")
    assert normalize_flags("vllm", flags) == {
        "max-model-len": 32000,
        "enable-prefix-caching": False,
        "tensor-parallel-size": 2,
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 2},
        "gpu-memory-utilization": 1.0,
        "kv-cache-dtype": None,
        "async-scheduling": False,
        "served-model-name": ["one"],
        "compilation-config": {"mode": 3},
    }


def test_normalize_flags_yaml_booleans_for_on_off_choices():
    assert normalize_flags("llamacpp", {"flash-attn": True, "fit": False}) == {"flash-attn": "on", "fit": "off"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"max-model-lenn": 3}, "did you mean --max-model-len"),
        ({"tp": 2, "tensor-parallel-size": 4}, "given twice"),
        ({"tensor-parallel-size": True}, "not True"),
        ({"tensor-parallel-size": 2.5}, "not a whole number"),
        ({"enable-prefix-caching": "maybe"}, "takes true or false"),
        ({"speculative-config": 3}, "JSON object"),
        ({"speculative-config": {"when": float("nan")}}, "JSON cannot carry"),
        ({"kv-cache-dtype": {"a": 1}}, "not one of its choices"),
        ({"served-model-name": []}, "at least one value"),
        ({"chat-template": ["a"]}, "takes a text value"),
    ],
)
def test_normalize_flags_errors(flags, message):
    with pytest.raises(ServetuneError) as err:
        normalize_flags("vllm", flags)
    assert message in str(err.value)


def test_normalize_flags_unknown_opt_in():
    assert normalize_flags("vllm", {"future": {"a": 1}, "max-model-len": "2K"}, allow_unknown=True) == {
        "future": {"a": 1},
        "max-model-len": 2048,
    }
    with pytest.raises(ServetuneError, match="gpu-memory-utilization"):
        normalize_flags("vllm", {"future": 1, "gpu-memory-utilization": "x"}, allow_unknown=True)


def test_sim_flags_are_known_to_the_sim_and_not_to_vllm():
    """Issue 16: sim experiments needed allow_unknown_flags for the sim's own documented flags."""
    assert normalize_flags("sim", {"time-scale": "5", "acceptance-rate": 0.7}) == {
        "time-scale": 5.0,
        "acceptance-rate": 0.7,
    }
    with pytest.raises(ServetuneError, match="time-scale"):
        normalize_flags("vllm", {"time-scale": 5})


# --------------------------------------------------------------------------------------------------- to_argv


def test_to_argv_writes_each_kind():
    flags = {
        "max-model-len": "128K",
        "enable-prefix-caching": False,
        "enforce-eager": True,
        "disable-log-stats": False,
        "speculative-config": {"method": "mtp", "num_speculative_tokens": 2},
        "served-model-name": ["a", "b"],
        "middleware": ["m1", "m2"],
        "kv-cache-dtype": None,
        "chat-template": "-weird",
        "seed": -1,
    }
    assert to_argv("vllm", flags) == [
        "--max-model-len", "131072",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--speculative-config", '{"method":"mtp","num_speculative_tokens":2}',
        "--served-model-name", "a", "b",
        "--middleware", "m1", "--middleware", "m2",
        "--chat-template=-weird",
        "--seed", "-1",
    ]  # fmt: skip


def test_to_argv_false_for_store_true_engines_is_left_out():
    assert to_argv("sglang", {"disable-radix-cache": False, "enable-torch-compile": True}) == ["--enable-torch-compile"]
    assert to_argv("llamacpp", {"cont-batching": False, "kv-unified": False}) == [
        "--no-cont-batching",
        "--no-kv-unified",
    ]
    assert to_argv("llamacpp", {"reverse-prompt": ["-x"]}) == ["--reverse-prompt", "-x"]


def test_to_argv_unknown_flags_pass_as_given():
    assert to_argv("vllm", {"future": True, "-x": "1", "other": False, "many": ["a", "b"], "dash": "-v"}) == [
        "--future", "-x", "1", "--no-other", "--many", "a", "b", "--dash=-v",
    ]  # fmt: skip


def test_to_argv_rejects_what_cannot_be_written():
    with pytest.raises(ServetuneError, match="cannot be written"):
        to_argv("vllm", {"served-model-name": ["-a", "-b"]})
    with pytest.raises(ServetuneError, match="max-model-len"):
        to_argv("vllm", {"max-model-len": "lots"})


def test_coerce_none_and_list_counts():
    spec = FlagSpec(name="pair", kind="list", item="int", nargs=2)
    assert coerce(spec, None) is None
    assert coerce(spec, ["1", 2]) == [1, 2]
    with pytest.raises(ServetuneError, match="exactly 2"):
        coerce(spec, [1])


# ------------------------------------------------------------------------------------- property: round trip

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


def _value(spec: FlagSpec, kind: str, argparse_engine: bool) -> st.SearchStrategy[Any]:
    """Typed values of a kind, as parse_argv returns them."""
    if kind == "bool":
        return st.booleans()
    if kind == "flag":
        return st.just(True)
    if kind in ("int", "len", "len_si"):
        return st.integers(min_value=-(2**40), max_value=2**40)
    if kind == "len_auto":
        return st.integers(min_value=-1, max_value=2**40)
    if kind == "float":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "choice":
        return st.sampled_from(spec.choices or ("x",))
    if kind == "json":
        return st.dictionaries(_TEXT, _JSON, max_size=3) | st.lists(_JSON, max_size=3)
    if kind == "json_or_str":
        return st.dictionaries(_TEXT, _JSON, max_size=3) | _TEXT.filter(lambda t: t.strip()[:1] not in ("{", "["))
    if kind == "str":
        text = _TEXT | st.just(True) if spec.nargs == "?" else _TEXT
        return text
    item_kind = spec.item or "str"
    item = _value(FlagSpec(name=spec.name, kind=item_kind, choices=spec.choices), item_kind, argparse_engine)
    if kind == "list" and argparse_engine and item_kind == "str":
        item = item.filter(lambda t: not t.startswith("-"))  # argparse cannot take such words after one flag
    if isinstance(spec.nargs, int):
        return st.lists(item, min_size=spec.nargs, max_size=spec.nargs)
    return st.lists(item, min_size=0 if spec.nargs == "*" else 1, max_size=4)


@st.composite
def _flags(draw: st.DrawFn, engine: str) -> dict[str, Any]:
    table = table_for(engine)
    specs = draw(st.lists(st.sampled_from(table.flags), min_size=1, max_size=6, unique_by=lambda s: s.name))
    return {s.name: draw(_value(s, s.kind, not table.value_always_next)) for s in specs}


@pytest.mark.parametrize("engine", ["vllm", "sim", "llamacpp", "sglang"])
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_parse_of_to_argv_is_identity(engine, data):
    flags = data.draw(_flags(engine))
    argv = to_argv(engine, flags)
    assert parse_argv(engine, argv) == flags
    assert normalize_flags(engine, flags) == flags


@settings(max_examples=100, deadline=None, database=None)
@given(
    known=_flags("vllm"),
    unknown=st.dictionaries(
        st.from_regex(r"zz[a-z]{1,6}", fullmatch=True),
        st.just(True) | st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True),
        max_size=3,
    ),
)
def test_round_trip_with_unknown_flags(known, unknown):
    flags = {**known, **unknown}
    assert parse_argv("vllm", to_argv("vllm", flags), allow_unknown=True) == flags


@settings(max_examples=200, deadline=None, database=None)
@given(
    words=st.lists(
        st.sampled_from(["--max-model-len", "-tp", "x", "1k", "-1", "--no-enforce-eager", "{", "="]) | _TEXT, max_size=6
    )
)
def test_parse_argv_never_fails_without_a_servetune_error(words):
    """Any argv either parses or raises ServetuneError (never a traceback)."""
    try:
        flags = parse_argv("vllm", words)
    except ServetuneError as err:
        assert err.fix
    else:
        json.dumps(flags)


def test_a_secret_flag_error_never_quotes_its_values() -> None:
    """vLLM's --api-key is list-valued: keys starting with '-' cannot be written after one flag, and the error
    that says so must not print the keys."""
    with pytest.raises(ServetuneError) as caught:
        to_argv("vllm", {"api-key": ["-sk-canary-1", "-sk-canary-2"]})
    assert "canary" not in str(caught.value) and "<redacted>" in str(caught.value)
