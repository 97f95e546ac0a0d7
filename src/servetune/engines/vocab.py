"""The one owner of engine flag syntax: command-line words ↔ typed flags, both ways, for every engine.

servetune reads engine flags from three places — a command line (`servetune plan -- --max-model-len 32K`), an
experiment's `flags:` mapping (YAML), and its own configs — and writes them into `vllm serve` / `llama-server` /
`sglang.launch_server` command lines. All of them go through this module, with the engine's generated flag
table (`servetune.engines.flagtable`), so that:

- every spelling the engine takes is understood (`--x v`, `--x=v`, `-tp 2`, `--no-x`, `max_model_len`), and a
  flag comes out under one canonical name (`max-model-len`) with a typed value (`128K` → 131072, like vLLM);
- a typo is an error that names the closest flags, never a silently dropped or passed-on word (unknown flags
  pass through only when the caller opts in, and then known flags are still type-checked);
- values are checked the way the engine checks them (vLLM's `1k` = 1000 and `1K` = 1024, finite floats,
  choices, JSON objects for config flags) before anything is launched.

Errors are `ServetuneError(problem, fix)`, whose fix names the flag and its allowed form.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, cast

from servetune.engines.flagtable import FlagSpec, FlagTable, FlagValue, Kind, table_for
from servetune.errors import ServetuneError
from servetune.secrets import is_secret_flag

_VLLM_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_VLLM_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_NUMBER_WORD = re.compile(r"^-(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[kKmMgGtT]?i?$")
"""A word that starts with `-` but is a (negative) number, so a value rather than a flag (`--seed -1`)."""
_ARGPARSE_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""argparse's own test for a negative-number value; other values starting with `-` need `--x=value`."""
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def human_readable_int(value: object, flag: str = "value") -> int:
    """vLLM's `human_readable_int`: `1k` = 1000, `1K` = 1024, `25.6k` = 25600; decimals only with the decimal
    suffixes k/m/g/t (`1.5K` is an error, as in vLLM). Ints pass; whole floats (YAML's `32768.0`) become ints."""
    return _vllm_int(value, flag, "len")


def _vllm_int(value: object, flag: str, kind: Kind) -> int:
    number = _plain_number(value, flag)
    if number is not None:
        return number
    text = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if not m:
        raise _bad_value(flag, text, kind)
    digits, suffix = m.groups()
    if suffix in _VLLM_BINARY:
        if "." in digits:
            raise ServetuneError(
                f"--{flag} {text!r}: vLLM allows decimals only with the decimal suffixes k, m, g, t",
                f"write --{flag} {digits}{suffix.lower()} (decimal) or a whole number with {suffix} (binary)",
            )
        return int(digits) * _VLLM_BINARY[suffix]
    return int(float(digits) * _VLLM_DECIMAL[suffix])  # vLLM's own arithmetic, so the result is the same


def _si_int(value: object, flag: str) -> int:
    """SGLang's `human_readable_int`: SI `k`/`M`/`G`/`T` (decimals allowed) and IEC `Ki`/`Mi`/`Gi`/`Ti`."""
    number = _plain_number(value, flag)
    if number is not None:
        return number
    text = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    if not m:
        raise _bad_value(flag, text, "len_si")
    digits, suffix = m.groups()
    if suffix in _IEC:
        if "." in digits:
            raise ServetuneError(
                f"--{flag} {text!r}: SGLang allows decimals only with the SI suffixes k, M, G, T",
                f"write --{flag} {digits}{suffix[0]} (SI) or a whole number with {suffix}",
            )
        return int(digits) * _IEC[suffix]
    return int(Decimal(digits) * _SI[suffix])


def _plain_number(value: object, flag: str) -> int | None:
    """An int from an int, a whole float or a plain digit string; None when `value` needs suffix parsing."""
    if isinstance(value, bool):
        raise ServetuneError(f"--{flag} needs a number, not {value!r}", f"e.g. --{flag} 32768")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ServetuneError(f"--{flag} {value!r} is not a whole number", f"e.g. --{flag} 32768")
        return int(value)
    if not isinstance(value, str):
        raise ServetuneError(f"--{flag} needs a number, not {type(value).__name__}", f"e.g. --{flag} 32768")
    text = value.strip()
    return int(text) if re.fullmatch(r"[-+]?\d+", text) else None


def _bad_value(flag: str, value: object, kind: Kind) -> ServetuneError:
    spec = FlagSpec(name=flag, kind=kind)
    return ServetuneError(f"--{flag} {value!r} is not {_article(kind)}", f"--{flag} takes {spec.describe()}")


def _article(kind: Kind) -> str:
    return {
        "int": "a whole number",
        "float": "a finite number",
        "len": "a token count",
        "len_auto": "a token count",
        "len_si": "a count",
    }.get(kind, "a valid value")


def coerce(spec: FlagSpec, value: object) -> FlagValue:
    """`value` (a command-line word, or what YAML gives) as the flag's typed value, checked like the engine
    checks it; None passes (it means "leave the flag out")."""
    if value is None:
        return None
    kind = spec.kind
    if kind in ("list", "append"):
        items = list(value) if isinstance(value, list | tuple) else [value]
        if kind == "list" and spec.nargs == "+" and not items:
            raise ServetuneError(f"{spec.option} needs at least one value", f"{spec.option} takes {spec.describe()}")
        if isinstance(spec.nargs, int) and len(items) != spec.nargs:
            raise ServetuneError(
                f"{spec.option} takes exactly {spec.nargs} values, got {len(items)}",
                f"write {spec.option} " + " ".join(["VALUE"] * spec.nargs),
            )
        item = FlagSpec(name=spec.name, kind=spec.item or "str", choices=spec.choices)
        return [_scalar(item, v) for v in items]
    if spec.nargs == "?" and value is True:
        return True
    return _scalar(spec, value)


def _scalar(spec: FlagSpec, value: object) -> FlagValue:
    kind, flag = spec.kind, spec.name
    if kind in ("bool", "flag"):
        return _boolean(spec, value)
    if kind == "len":
        return human_readable_int(value, flag)
    if kind == "len_auto":
        if isinstance(value, str) and value.strip().lower() in ("auto", "-1"):
            return -1
        return _vllm_int(value, flag, kind)
    if kind == "len_si":
        return _si_int(value, flag)
    if kind == "int":
        number = _plain_number(value, flag)
        if number is None:
            raise _bad_value(flag, value, kind)
        return number
    if kind == "float":
        return _finite(value, flag)
    if kind == "choice":
        return _choice(spec, value)
    if kind == "json":
        return _json(spec, value, plain_ok=False)
    if kind == "json_or_str":
        return _json(spec, value, plain_ok=True)
    if isinstance(value, bool) or not isinstance(value, str | int | float):  # str
        raise ServetuneError(
            f"{spec.option} takes a text value, not {value!r}", f"write it as {spec.option} VALUE (quote it in YAML)"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad_value(flag, value, "float")
    return str(value)


def _boolean(spec: FlagSpec, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ServetuneError(f"{spec.option} takes true or false, not {value!r}", f"{spec.option} takes {spec.describe()}")


def _finite(value: object, flag: str) -> float:
    if isinstance(value, bool):
        raise _bad_value(flag, value, "float")
    try:
        number = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        raise _bad_value(flag, value, "float") from None
    if not math.isfinite(number):
        raise _bad_value(flag, value, "float")
    return number


def _choice(spec: FlagSpec, value: object) -> str | int:
    choices = spec.choices or ()
    if isinstance(value, bool):  # YAML reads `on`/`off`/`true` as booleans: map them back to the engine's words
        words = {True: ("on", "true", "1"), False: ("off", "false", "0")}[value]
        value = next((w for w in words if w in choices), value)
    if any(isinstance(c, int) for c in choices) and isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        value = int(value)
    elif isinstance(value, int | float) and not isinstance(value, bool) and str(value) in choices:
        value = str(value)
    if isinstance(value, str | int) and not isinstance(value, bool) and value in choices:
        return value
    raise ServetuneError(f"{spec.option} {value!r} is not one of its choices", f"{spec.option} takes {spec.describe()}")


def _json(spec: FlagSpec, value: object, *, plain_ok: bool) -> FlagValue:
    if isinstance(value, dict | list):
        try:  # YAML can hold dates, sets and NaN, which JSON cannot
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ServetuneError(
                f"{spec.option} holds a value JSON cannot carry: {err}", f"{spec.option} takes {spec.describe()}"
            ) from None
        return value
    if not isinstance(value, str):
        raise ServetuneError(
            f"{spec.option} takes {spec.describe()}, not {value!r}", f"{spec.option} takes {spec.describe()}"
        )
    text = value.strip()
    if plain_ok and text[:1] not in ("{", "["):
        return value
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as err:
        raise ServetuneError(
            f"{spec.option} is not valid JSON ({err.msg} at character {err.pos}): {value!r}",
            f"{spec.option} takes {spec.describe()}; quote it for the shell",
        ) from None
    if not isinstance(parsed, dict | list):
        raise ServetuneError(
            f"{spec.option} {value!r} is JSON but not an object or list", f"{spec.option} takes {spec.describe()}"
        )
    return parsed


# -------------------------------------------------------------------------------------------- argv → flags


def parse_argv(
    engine: str, argv: Sequence[str], *, version: str | None = None, allow_unknown: bool = False
) -> dict[str, FlagValue]:
    """An engine command line's flags (`--x v`, `--x=v`, `-tp 2`, `--flag`, `--no-x`, `--x a b` for list kinds,
    a repeated append flag, vLLM's `--json-flag.key v` and `-O3`) as {canonical name: typed value}.

    Only flags: a positional word (the model of `vllm serve MODEL`) is an error, so strip it first. A flag given
    twice is an error (the engines would keep the last one without a word), except append kinds. An unknown
    flag is an error naming the closest known ones, unless `allow_unknown`: then it is kept as given (its
    name without `--`, its words untouched: True when bare, a string, or a list for several words)."""
    table = table_for(engine, version)
    out: dict[str, FlagValue] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-") or token in ("-", "--") or _NUMBER_WORD.match(token):
            raise _positional(table, argv, i)
        name, eq, inline = token.partition("=")
        if table.optimization_level and name.startswith("-O") and not name.startswith("--") and name not in table:
            level = inline if eq else name[2:]  # -O3, -O=3, -O 3
            if not level and i + 1 < len(argv):
                level, i = argv[i + 1], i + 1
            _store(out, table[table.optimization_level], coerce(table[table.optimization_level], level), token)
            i += 1
            continue
        dotted = _json_base(table, name) if table.dotted_json and name.startswith("--") else None
        if dotted is not None:
            i = _dotted(dotted, argv, i, name, inline if eq else None, out)
            continue
        hit = table.resolve(name)
        if hit is None:
            if not allow_unknown:
                raise unknown_flag(table, name)
            i = _unknown(argv, i, name, inline if eq else None, out)
            continue
        spec, negated = hit
        i, value = _read_value(table, spec, negated, argv, i, inline if eq else None)
        _store(out, spec, value, token)
    return out


def _read_value(
    table: FlagTable, spec: FlagSpec, negated: bool, argv: Sequence[str], i: int, inline: str | None
) -> tuple[int, FlagValue]:
    """The value of the flag at argv[i] (consuming its words) and the index after them."""
    token = argv[i]
    if negated:
        if inline is not None:
            raise ServetuneError(f"{token} takes no value", f"write {token} alone, or {spec.option}=false")
        return i + 1, False
    if not spec.takes_value:
        return i + 1, True if inline is None else coerce(spec, inline)
    if inline is not None:
        return i + 1, coerce(spec, [inline] if spec.kind == "list" else inline)
    words: list[str] = []
    j = i + 1
    limit = spec.nargs if isinstance(spec.nargs, int) else (None if spec.kind == "list" else 1)
    while j < len(argv) and (limit is None or len(words) < limit) and _is_value(table, argv[j]):
        words.append(argv[j])
        j += 1
    if spec.kind == "list":
        return j, coerce(spec, words)
    if not words:
        if spec.nargs == "?":
            return j, True
        raise ServetuneError(
            f"{spec.option} needs a value"
            + (f", got {_shown(spec, argv[j])!r}" if j < len(argv) else " (it is the last word)"),
            f"{spec.option} takes {spec.describe()}"
            + ("" if table.value_always_next else f"; a value starting with '-' is written {spec.option}=VALUE"),
        )
    return j, coerce(spec, words[0])


def _is_value(table: FlagTable, word: str) -> bool:
    """Whether `word` is a value rather than the next flag: llama.cpp takes the next word whatever it is;
    argparse engines take words not starting with `-`, and negative numbers (`--seed -1`)."""
    return table.value_always_next or not word.startswith("-") or bool(_NUMBER_WORD.match(word))


def _store(out: dict[str, FlagValue], spec: FlagSpec, value: FlagValue, token: str) -> None:
    if spec.kind == "append":
        previous = out.get(spec.name)
        out[spec.name] = [
            *(previous if isinstance(previous, list) else []),
            *(value if isinstance(value, list) else [value]),
        ]
        return
    if spec.name in out:
        raise ServetuneError(
            f"{spec.option} is given twice ({_show(out[spec.name])} and {_show(value)}, the second as {token})",
            f"give {spec.option} once",
        )
    out[spec.name] = value


def _show(value: FlagValue) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else repr(value)


def _json_base(table: FlagTable, name: str) -> FlagSpec | None:
    """The JSON flag a dotted spelling (`--speculative-config.method`) sets a key of, or None."""
    base, dot, keys = name.partition(".")
    spec = table.lookup(base) if dot else None
    if spec is None:
        return None
    if spec.kind not in ("json", "json_or_str") or not all(keys.split(".")):
        raise ServetuneError(
            f"{name}: only JSON flags take dotted keys, and {spec.option} takes {spec.describe()}",
            f"write {spec.option} VALUE",
        )
    return spec


def _dotted(
    spec: FlagSpec, argv: Sequence[str], i: int, name: str, inline: str | None, out: dict[str, FlagValue]
) -> int:
    """vLLM's `--json-flag.key.sub value` (and `key+` to append to a list) merged into that flag's object."""
    keys = name.split(".")[1:]
    j = i + 1
    if inline is None:
        if j >= len(argv):
            raise ServetuneError(f"{name} needs a value", f"e.g. {name} 2")
        inline, j = argv[j], j + 1
    current = out.get(spec.name, {})
    if not isinstance(current, dict):
        raise ServetuneError(
            f"{name} adds a key to {spec.option}, which is already {_show(current)}", f"give {spec.option} one way"
        )
    _merge_key(current, keys, inline)
    out[spec.name] = current
    return j


def _merge_key(target: dict[str, Any], keys: list[str], text: str) -> None:
    """vLLM's rule for a dotted value: JSON if it parses, else a human-readable int (`80g`), else the text."""
    value: Any
    if keys[-1].endswith("+"):
        keys = [*keys[:-1], keys[-1][:-1]]
        value = text.split(",")
    else:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            try:
                value = human_readable_int(text)
            except ServetuneError:
                value = text
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise ServetuneError(f"key {key!r} is set to a value and then used as an object", "give each key once")
    last = keys[-1]
    if isinstance(value, list) and isinstance(target.get(last), list):
        target[last] = [*target[last], *value]
    else:
        target[last] = value


def _unknown(argv: Sequence[str], i: int, name: str, inline: str | None, out: dict[str, FlagValue]) -> int:
    """An unknown flag kept as given (opted in): True when bare, its word, or its words as a list."""
    key = name[2:] if name.startswith("--") else name
    if inline is not None:
        out[key] = inline
        return i + 1
    words = []
    j = i + 1
    while j < len(argv) and (not argv[j].startswith("-") or _NUMBER_WORD.match(argv[j])):
        words.append(argv[j])
        j += 1
    out[key] = True if not words else words[0] if len(words) == 1 else words
    return j


def _positional(table: FlagTable, argv: Sequence[str], i: int) -> ServetuneError:
    word = argv[i]
    before = table.lookup(argv[i - 1].partition("=")[0]) if i else None
    if before is not None and not before.takes_value:
        problem = f"unexpected word {word!r}: {argv[i - 1]} takes no value"
    else:
        problem = f"unexpected word {word!r} where a {table.title} flag was expected"
    return ServetuneError(
        problem, "write flags as --name value or --name=value (e.g. --max-model-len 32K); give the model on its own"
    )


def unknown_flag(table: FlagTable, token: str) -> ServetuneError:
    """The error for a flag the table lacks: the closest names, and the versions that do have it."""
    name = token.lstrip("-").replace("_", "-")
    problem = f"{token} is not a {table.title} flag"
    elsewhere = table.other_versions(name)
    if elsewhere:
        problem += f" (it is one of {', '.join(elsewhere)})"
    renamed = dict(table.changes.renamed) if table.changes else {}
    close = [renamed[name]] if name in renamed else table.suggest(name)
    fix = (
        f"did you mean {' or '.join('--' + c for c in close)}?"
        if close
        else f"check it against the {table.title} flags."
    )
    fix += (
        " To pass on a flag servetune does not know, opt in: --pass-unknown-flags"
        " (in an experiment: allow_unknown_flags: true)."
    )
    return ServetuneError(problem, fix)


# ------------------------------------------------------------------------------------------ mapping → flags


def normalize_flags(
    engine: str, flags: Mapping[str, object], *, version: str | None = None, allow_unknown: bool = False
) -> dict[str, FlagValue]:
    """Flags given as a mapping (an experiment's `flags:`, an EngineConfig) canonicalised and typed like
    `parse_argv`: keys with or without dashes, `_` or `-`, aliases, `no-x: true`, vLLM's `json-flag.key: v`;
    values as YAML gives them (`max-model-len: 32k`, `enable-prefix-caching: false`, `speculative-config: {...}`).

    None means "leave this flag out": it is kept (under the canonical name) so that a layer of configuration can
    remove a flag a lower layer set; `to_argv` writes nothing for it. Unknown keys are an error, unless
    `allow_unknown` (then kept as given, key and value, while known keys are still type-checked)."""
    table = table_for(engine, version)
    out: dict[str, FlagValue] = {}
    given: dict[str, str] = {}
    for key, value in flags.items():
        token = key if key.startswith("-") else f"--{key}"
        dotted = _json_base(table, key) if table.dotted_json else None
        if dotted is not None:
            spec, keys = dotted, key.split(".")[1:]
            current = out.get(spec.name, {})
            if not isinstance(current, dict):
                raise ServetuneError(
                    f"{key} adds a key to {spec.name}, which is already {_show(current)}", "give it one way"
                )
            _merge_key(current, keys, value if isinstance(value, str) else json.dumps(value))
            out[spec.name] = current
            given.setdefault(spec.name, key)
            continue
        hit = table.resolve(key)
        if hit is None:
            if not allow_unknown:
                raise unknown_flag(table, token)
            out[key] = cast(FlagValue, value)  # untouched: the caller opted in
            continue
        spec, negated = hit
        if spec.name in given:
            raise ServetuneError(
                f"{spec.option} is given twice, as {given[spec.name]!r} and {key!r}", "keep one of the two keys"
            )
        given[spec.name] = key
        typed = coerce(spec, value)
        if negated and typed is not None:
            typed = not _boolean(spec, typed)
        out[spec.name] = typed
    return out


# -------------------------------------------------------------------------------------------- flags → argv


def to_argv(engine: str, flags: Mapping[str, object], *, version: str | None = None) -> list[str]:
    """The command-line words for `flags` (normalised first, so any accepted spelling and value works).

    True writes the bare flag; False writes the engine's negation (`--no-x`) where the flag has one (vLLM's and
    llama.cpp's booleans) and nothing for a store_true flag (all of SGLang's switches, vLLM's `flag` kind),
    since leaving it out is how those engines say False; None writes nothing. dicts and lists are compact JSON,
    list kinds several words after one flag, append kinds the flag once per value. Unknown flags (kept by an
    opted-in `normalize_flags`/`parse_argv`) are written as given: `--name` (a name with its own leading dash
    stays), True bare, False as `--no-name`, a list as several words.
    `parse_argv(engine, to_argv(engine, f)) == f` for every f that `parse_argv` returns."""
    return canonical_argv(engine, normalize_flags(engine, flags, version=version, allow_unknown=True), version=version)


def canonical_argv(engine: str, flags: Mapping[str, FlagValue], *, version: str | None = None) -> list[str]:
    """`to_argv` of flags already in their canonical form (an `EngineConfig`'s: normalised once, where they entered),
    so that writing a config's command line does not read every flag again."""
    table = table_for(engine, version)
    argv: list[str] = []
    for name, value in flags.items():
        spec = table.lookup(name if name.startswith("-") else f"--{name}")
        if value is None:
            continue
        if spec is None:
            argv += _unknown_words(name, value)
        else:
            argv += _words(table, spec, value)
    return argv


def _words(table: FlagTable, spec: FlagSpec, value: FlagValue) -> list[str]:
    if spec.kind == "bool":
        if value:
            return [spec.option]
        preferred = f"--no-{spec.name}"
        return [preferred if preferred in spec.negations else spec.negations[0]] if spec.negations else []
    if spec.kind == "flag" or (spec.nargs == "?" and value is True):
        return [spec.option] if value else []
    if spec.kind == "append":
        assert isinstance(value, list)
        return [w for item in value for w in _pair(table, spec.option, _text(item))]
    if spec.kind == "list":
        assert isinstance(value, list)
        items = [_text(item) for item in value]
        if not table.value_always_next and any(w.startswith("-") and not _ARGPARSE_NEGATIVE.match(w) for w in items):
            if len(items) != 1:
                raise ServetuneError(
                    f"{spec.option}: values starting with '-' ({_shown(spec, items)}) cannot be written after one flag",
                    "rename the values, or give one value (it is then written --name=value)",
                )
            return [f"{spec.option}={items[0]}"]
        return [spec.option, *items]
    return _pair(table, spec.option, _text(value))


def _shown(spec: FlagSpec, value: Any) -> Any:
    """A value as an error message may quote it: a secret flag's words never reach the terminal or a log."""
    return "<redacted>" if is_secret_flag(spec.option) else value


def _pair(table: FlagTable, option: str, word: str) -> list[str]:
    if not table.value_always_next and word.startswith("-") and not _ARGPARSE_NEGATIVE.match(word):
        return [f"{option}={word}"]  # argparse would read the word as a flag
    return [option, word]


def _text(value: object) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float) and value < 0 and "e" in repr(value):
        return format(Decimal(repr(value)), "f")  # argparse takes -1e+16 for a flag, -10000000000000000 for a number
    return str(value)


def _unknown_words(name: str, value: object) -> list[str]:
    option = name if name.startswith("-") else f"--{name}"
    if value is True:
        return [option]
    if value is False:
        return [f"--no-{name.lstrip('-')}"]
    if isinstance(value, list):
        return [option, *(_text(v) for v in value)]
    word = _text(value)
    return [f"{option}={word}"] if word.startswith("-") and not _NUMBER_WORD.match(word) else [option, word]


__all__ = ["coerce", "human_readable_int", "normalize_flags", "parse_argv", "to_argv", "unknown_flag"]
