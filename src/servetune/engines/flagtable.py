"""The engines' flag tables: every flag of `vllm serve`, `llama-server` and SGLang's `launch_server`, per version.

The tables (`flagtables/*.json`) are generated from the engines' own argument definitions by
`scripts/gen_flag_tables.py` (vLLM's argparse parser, llama.cpp's `common/arg.cpp`, SGLang's `server_args.py`),
not written by hand, so a flag servetune has never heard of is still known with its kind, and a typo is caught
with a suggestion. `servetune.engines.vocab` reads and writes flags through them; nothing else should hold a
list of engine flags.

Loading is lazy and cached (one small JSON file per engine and version); this module imports no engine.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any, Literal, cast, get_args

from servetune.errors import ServetuneError

FlagValue = str | int | float | bool | None | dict | list
"""A flag's value: True = bare flag, False = `--no-<flag>` where the engine has one (vLLM), None = leave out,
dict/list = JSON (e.g. vLLM's `speculative-config`)."""

Kind = Literal[
    "bool",
    "flag",
    "int",
    "float",
    "str",
    "choice",
    "len",
    "len_auto",
    "len_si",
    "json",
    "json_or_str",
    "list",
    "append",
]
"""What a flag takes:

- `bool`: `--x` / `--no-x` (argparse's BooleanOptionalAction; llama.cpp's flag pairs).
- `flag`: `--x` only (store_true; False means "not given").
- `int`, `float` (finite), `str`; `choice`: one of `FlagSpec.choices`.
- `len`: vLLM's `human_readable_int`: `1k` = 1000, `1K` = 1024, `25.6k` = 25600 (decimals only with k/m/g/t).
- `len_auto`: `len`, or `auto` / `-1` (vLLM's `human_readable_int_or_auto`, e.g. `--max-model-len`).
- `len_si`: SGLang's `human_readable_int`: `1k` = 1000, `1M` = 10**6, `1Ki` = 1024 (case-sensitive).
- `json`: a JSON object or list (vLLM's `speculative-config`, `compilation-config`, ...).
- `json_or_str`: JSON, or a plain word (vLLM's `hf-overrides`, `additional-config`).
- `list`: several values after one flag (`nargs` "+", "*" or a count), each of kind `FlagSpec.item`.
- `append`: the flag repeated, one value (of kind `FlagSpec.item`) each time.
"""

KINDS: tuple[Kind, ...] = get_args(Kind)
ENGINES = ("vllm", "llamacpp", "sglang", "sim")
ENGINE_TITLES = {"vllm": "vLLM", "llamacpp": "llama-server", "sglang": "SGLang", "sim": "sim-serve"}


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One engine flag: its canonical name (dashed, no leading dashes), spellings and value kind."""

    name: str
    kind: Kind
    aliases: tuple[str, ...] = ()
    """Other spellings, with their dashes as the engine writes them (`-tp`, `--n-gpu-layers`)."""
    negations: tuple[str, ...] = ()
    """The spellings that turn a `bool` flag off (`--no-enable-prefix-caching`, llama.cpp's `-nocb`)."""
    choices: tuple[str | int, ...] | None = None
    item: Kind | None = None
    """The kind of each value of a `list` or `append` flag."""
    nargs: str | int | None = None
    """`list`: "+", "*" or a fixed count; `?` on a value kind: the value may be left out (a bare flag = True)."""
    serving: bool = False
    """Set by servetune itself when it launches the engine (host, port, model, served name)."""
    deprecated: bool = False
    sim_only: bool = False
    """A `servetune sim-serve` setting that real vLLM does not take (dropped from a deployable command)."""
    help: str = ""
    dest: str | None = None
    """The engine's own attribute name, when it is not the name with `_` for `-` (finds renames across versions)."""

    @property
    def option(self) -> str:
        """The canonical spelling on a command line: `--max-model-len`."""
        return f"--{self.name}"

    @property
    def takes_value(self) -> bool:
        """False for `bool` and `flag` kinds, which are switched by their spelling alone."""
        return self.kind not in ("bool", "flag")

    def describe(self) -> str:
        """The allowed form of a value, for the `fix:` line of an error about this flag."""
        return _describe(self.kind, self.choices, self.item, self.option)


def _describe(kind: Kind, choices: tuple[str | int, ...] | None, item: Kind | None, option: str) -> str:
    if kind == "choice" and choices:
        return "one of " + ", ".join(str(c) for c in choices)
    if kind in ("list", "append"):
        inner = _describe(item or "str", choices, None, option)
        many = f"several values after one {option}" if kind == "list" else f"{option} repeated, once per value"
        return f"{many}, each {inner}"
    return {
        "bool": f"true or false ({option} to turn it on, --no-{option[2:]} to turn it off)",
        "flag": f"no value ({option} turns it on; leave it out for off)",
        "int": "a whole number",
        "float": "a finite number",
        "str": "a text value",
        "len": "a whole number or a count with a suffix: 128K (=131072), 128k (=128000), 1M (=1048576)",
        "len_auto": "a whole number or a count with a suffix (128K = 131072, 128k = 128000), or auto / -1",
        "len_si": "a whole number or a count with a suffix: 128k (=128000), 1M (=1000000), 128Ki (=131072)",
        "json": """a JSON object (or list), e.g. '{"method": "mtp", "num_speculative_tokens": 2}'""",
        "json_or_str": """a JSON object, e.g. '{"key": 1}', or a plain name""",
    }.get(kind, "a value")


@dataclass(frozen=True, slots=True)
class TableChanges:
    """What a table changed against the next older table of the same engine (generated, so it is complete)."""

    since: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    """(old name, new name) pairs."""
    kind_changed: tuple[tuple[str, str], ...] = ()
    """(name, "old -> new") pairs."""


@dataclass(frozen=True)
class FlagTable:
    """Every flag of one engine version, with lookups by any spelling.

    `version` is the version the table was generated for; `notes` says so when it is not the version asked for.
    """

    engine: str
    version: str | None
    source: str
    flags: tuple[FlagSpec, ...]
    changes: TableChanges | None = None
    subsets: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Named subsets of the flags, e.g. ("xllamacpp-launcher", names servetune's xllamacpp launcher takes)."""
    notes: tuple[str, ...] = ()
    dotted_json: bool = False
    """vLLM's FlexibleArgumentParser: `--speculative-config.method mtp` sets one key of a JSON flag."""
    optimization_level: str | None = None
    """vLLM 0.20+: `-O3` / `-O 3` spell this flag."""
    value_always_next: bool = False
    """llama.cpp: the word after a flag is its value even when it starts with `-` (argparse engines: not)."""
    _exact: dict[str, tuple[FlagSpec, bool]] = field(init=False, repr=False, compare=False)
    _loose: dict[str, tuple[FlagSpec, bool]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exact: dict[str, tuple[FlagSpec, bool]] = {}
        for spec in self.flags:
            for token in (spec.option, *spec.aliases):
                exact.setdefault(token, (spec, False))
            for token in spec.negations:
                exact.setdefault(token, (spec, True))
        loose: dict[str, tuple[FlagSpec, bool]] = {}
        # Canonical names first, then long spellings, then short aliases without their dash (`tp`): an earlier
        # key is never shadowed by a later, looser one.
        for spec in self.flags:
            loose.setdefault(_loose_key(spec.name), (spec, False))
        for token, hit in exact.items():
            if token.startswith("--"):
                loose.setdefault(_loose_key(token), hit)
        for token, hit in exact.items():
            if not token.startswith("--"):
                loose.setdefault(_loose_key(token), hit)
        object.__setattr__(self, "_exact", exact)
        object.__setattr__(self, "_loose", loose)

    @property
    def title(self) -> str:
        """`vLLM 0.32.0`, `llama-server b11549`: how errors name the table."""
        name = ENGINE_TITLES.get(self.engine, self.engine)
        if self.engine == "sim":
            return f"{name} (vLLM {self.version})"
        return f"{name} {self.version}" if self.version else name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.flags)

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self.lookup(token) is not None

    def __getitem__(self, name: str) -> FlagSpec:
        spec = self.lookup(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def resolve(self, token: str) -> tuple[FlagSpec, bool] | None:
        """The flag a spelling names and whether the spelling negates it (`--no-x`), or None when unknown.

        Takes `--max-model-len`, `max_model_len`, `max-model-len`, aliases (`-tp`, or `tp` where no flag is called
        that) and negations (`--no-enable-prefix-caching`, `no_enable_prefix_caching`)."""
        hit = self._exact.get(token)
        if hit is None and token.startswith("--"):
            hit = self._exact.get("--" + token[2:].replace("_", "-"))
        if hit is None and not token.startswith("-"):
            hit = self._loose.get(_loose_key(token))
        return hit

    def lookup(self, token: str) -> FlagSpec | None:
        """The flag a spelling names (a negation names its flag), or None."""
        hit = self.resolve(token)
        return hit[0] if hit else None

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """The closest known canonical names to an unknown one (difflib), best first."""
        import difflib

        key = _loose_key(name)
        spellings: dict[str, str] = {}
        for token, (spec, _) in self._exact.items():
            if token.startswith("--"):
                spellings.setdefault(_loose_key(token), spec.name)
        close = difflib.get_close_matches(key, list(spellings), n=n * 2, cutoff=0.6)
        out: list[str] = []
        for match in close:
            if spellings[match] not in out:
                out.append(spellings[match])
        return out[:n]

    def subset(self, name: str) -> tuple[str, ...]:
        """The canonical names of a named subset (empty when the table has none of that name)."""
        return dict(self.subsets).get(name, ())

    def other_versions(self, name: str) -> list[str]:
        """The versions of this engine whose table has the flag `name` (for "it was removed in 0.24" errors)."""
        engine = "vllm" if self.engine == "sim" else self.engine
        key = _loose_key(name)
        return [
            version
            for version in versions(engine)
            if version != self.version and _load(engine, version).resolve(key) is not None
        ]


def _loose_key(token: str) -> str:
    return token.lstrip("-").replace("_", "-")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


@cache
def _files() -> dict[str, dict[str, str]]:
    """{engine: {version: file name}} of the packaged tables (`sim.json` is kept under engine "sim", version "")."""
    out: dict[str, dict[str, str]] = {}
    for entry in resources.files("servetune.engines").joinpath("flagtables").iterdir():
        stem, dot, ext = entry.name.rpartition(".")
        if ext != "json" or not dot:
            continue
        engine, _, version = stem.partition("-")
        out.setdefault(engine, {})[version] = entry.name
    return out


def versions(engine: str) -> list[str]:
    """The versions servetune has a table for, oldest first (vLLM: 0.11.2 ... ; llama.cpp: build numbers)."""
    engine = "vllm" if engine == "sim" else engine
    return sorted(_files().get(engine, {}), key=_version_key)


@cache
def _raw(engine: str, version: str) -> dict[str, Any]:
    name = _files()[engine][version]
    text = resources.files("servetune.engines").joinpath("flagtables", name).read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


def _spec(entry: dict[str, Any], **override: Any) -> FlagSpec:
    fields = {**entry, **override}
    for key in ("aliases", "negations", "choices"):
        if fields.get(key) is not None:
            fields[key] = tuple(fields[key])
    return FlagSpec(**fields)


SHORTHANDS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "tensor-parallel-size": ("--tp",),
        "pipeline-parallel-size": ("--pp",),
        "data-parallel-size": ("--dp",),
    },
}
"""Spellings servetune accepts beyond the engine's own, because users type them (vLLM's own aliases are `-tp`,
`-pp`, `-dp`; servetune also takes `--tp`, `--pp`, `--dp`). Commands servetune writes use the canonical
names, so an emitted command never depends on them."""


def _with_shorthands(engine: str, spec: FlagSpec) -> FlagSpec:
    extra = SHORTHANDS.get(engine, {}).get(spec.name, ())
    return replace(spec, aliases=(*spec.aliases, *extra)) if extra else spec


@cache
def _load(engine: str, version: str) -> FlagTable:
    raw = _raw(engine, version)
    changes = raw.get("changes")
    syntax = raw.get("syntax", {})
    return FlagTable(
        engine=engine,
        version=raw["version"],
        source=raw["source"],
        flags=tuple(_with_shorthands(engine, _spec(entry)) for entry in raw["flags"]),
        changes=TableChanges(
            since=changes["since"],
            added=tuple(changes["added"]),
            removed=tuple(changes["removed"]),
            renamed=tuple(changes["renamed"].items()),
            kind_changed=tuple(changes["kind_changed"].items()),
        )
        if changes
        else None,
        subsets=tuple((k, tuple(v)) for k, v in raw.get("subsets", {}).items()),
        notes=tuple(raw.get("notes", ())),
        dotted_json=bool(syntax.get("dotted_json")),
        optimization_level=syntax.get("optimization_level"),
        value_always_next=bool(syntax.get("value_always_next")),
    )


def _normal_version(engine: str, version: str) -> tuple[int, ...]:
    """A version as numbers to compare: vLLM `v0.24.0+cpu` → (0, 24, 0); llama.cpp `b11549`, `11549` and
    xllamacpp's `2026.10.11549` (which bundles llama.cpp b11549) → (11549,)."""
    text = version.strip().lstrip("vV").split("+", 1)[0]
    numbers = _version_key(text)
    if not numbers:
        raise ServetuneError(
            f"{ENGINE_TITLES.get(engine, engine)} version {version!r} is not a version number",
            "give it as digits, e.g. 0.24.0 (llama.cpp: a build such as b11549)",
        )
    return numbers[-1:] if engine == "llamacpp" else numbers


@cache
def table_for(engine: str, version: str | None = None) -> FlagTable:
    """The flag table of `engine` at `version`: that version's own table, else the nearest older one (with a note
    saying which was used), else the newest (with a note). `sim` is the vLLM table of the vLLM version the
    simulator imitates, plus the simulator's own flags (marked `sim_only`)."""
    if engine not in ENGINES:
        raise ServetuneError(f"unknown engine {engine!r}", "use one of " + ", ".join(ENGINES))
    base_engine = "vllm" if engine == "sim" else engine
    known = versions(base_engine)
    if not known:
        raise ServetuneError(f"servetune has no flag table for {engine}", "reinstall servetune (package data missing)")
    chosen, note, newer = known[-1], None, None
    if version is not None:
        wanted = _normal_version(base_engine, version)
        by_key = {_normal_version(base_engine, v): v for v in known}
        older = [k for k in by_key if k <= wanted]
        later = [k for k in by_key if k > wanted]
        title = ENGINE_TITLES[base_engine]
        if wanted in by_key:
            chosen = by_key[wanted]
        elif older:
            chosen = by_key[max(older)]
            newer = by_key[min(later)] if later else None
            note = f"{title} {version} has no flag table of its own: using {chosen}'s, the nearest older one" + (
                f", with the flags {newer} added since" if newer else ""
            )
        else:
            note = f"{title} {version} is older than every flag table ({known[0]} is the oldest): using {chosen}'s"
    table = _load(base_engine, chosen)
    if newer is not None:
        # Between two tables a flag the newer one has may already exist: it is taken (typed by the newer table)
        # rather than refused, since only a flag no table knows is certainly wrong.
        have = set(table.names)
        added = tuple(spec for spec in _load(base_engine, newer).flags if spec.name not in have)
        table = FlagTable(**{**_fields(table), "flags": (*table.flags, *added)})
    if engine == "sim":
        table = _with_sim_flags(table)
    if note:
        table = FlagTable(**{**_fields(table), "notes": (*table.notes, note)})
    return table


def _fields(table: FlagTable) -> dict[str, Any]:
    return {
        name: getattr(table, name)
        for name in (
            "engine",
            "version",
            "source",
            "flags",
            "changes",
            "subsets",
            "notes",
            "dotted_json",
            "optimization_level",
            "value_always_next",
        )
    }


def _with_sim_flags(vllm: FlagTable) -> FlagTable:
    """The vLLM table with `servetune sim-serve`'s own flags laid over it (one of them, `seed`, is a vLLM flag too:
    the simulator's entry replaces vLLM's, and so it is `sim_only` like the others, as `sim/flags.py` has it)."""
    sim = {entry["name"]: _spec(entry) for entry in _raw("sim", "")["flags"]}
    flags = [sim.pop(spec.name, spec) for spec in vllm.flags]
    return FlagTable(
        **{
            **_fields(vllm),
            "engine": "sim",
            "flags": (*flags, *sim.values()),
            "source": f"{vllm.source}; plus servetune sim-serve's own flags",
        }
    )


__all__ = ["ENGINES", "KINDS", "FlagSpec", "FlagTable", "Kind", "TableChanges", "table_for", "versions"]
