"""Generates servetune's engine flag tables (`src/servetune/engines/flagtables/*.json`) from the engines' own
argument definitions, so that `servetune.engines.vocab` knows every flag of every supported engine version
without a hand-kept list:

    # vLLM: from `scripts/dump_vllm_args.py` dumps (one per version; kept in tests/engines/data/)
    python scripts/gen_flag_tables.py vllm tests/engines/data/vllm-args-0.32.0.json ...
    # llama.cpp's llama-server: from common/arg.cpp (a file, or the xllamacpp sdist that bundles it)
    python scripts/gen_flag_tables.py llamacpp xllamacpp-2026.10.11549.tar.gz
    # SGLang: from python/sglang/srt (a source folder, or a wheel), read with `ast` (nothing imported)
    python scripts/gen_flag_tables.py sglang sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl

The simulator's own flags (`flagtables/sim.json`: `--gpu`, `--time-scale`, ...) are the one table kept by hand:
it is their source (`sim.flags` reads it, a test holds it to `sim.flags.SimServeArgs`'s fields and types).

Each table lists one flag per line (so a diff between versions reads flag by flag) and, for engines with
several versions, a `changes` block against the next older table in the folder: flags added, removed,
renamed (same destination, or the old name kept as an alias) and flags whose kind changed. Nothing of the
engines is imported.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLES = ROOT / "src" / "servetune" / "engines" / "flagtables"

SERVING = {
    "vllm": {"host", "port", "model", "served-model-name"},
    "llamacpp": {"host", "port", "model", "alias"},
    "sglang": {"host", "port", "model-path", "served-model-name"},
}
"""Flags servetune sets itself when it launches an engine (a user's value would fight servetune's own)."""

_DEPRECATED = re.compile(
    r"\[deprecated\]|\bdeprecated\b[.:)]|^deprecated\b|\b(?:is|are|will be|has been) deprecated\b"
    r"|\bdeprecated (?:and|in favou?r|since|alias)\b",
    re.IGNORECASE,
)


def _deprecated(help_text: str) -> bool:
    """A help text that says the flag itself is deprecated ("Enable deprecated metrics" does not)."""
    return bool(_DEPRECATED.search(help_text))


def _first_sentence(text: str, limit: int = 200) -> str:
    """The first sentence of a help text, on one line, at most `limit` characters."""
    text = " ".join(text.split())
    end = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<=[A-Za-z0-9)\]`'\"])\.(?=\s+[A-Z(`'\"])", text)
    if end and end.start() < limit:
        text = text[: end.start() + 1]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _spec(name: str, kind: str, **fields: Any) -> dict[str, Any]:
    """One flag entry with the default-valued fields left out (the tables stay small and diffable)."""
    entry: dict[str, Any] = {"name": name, "kind": kind}
    for key, value in fields.items():
        if value not in (None, False, [], (), ""):
            entry[key] = list(value) if isinstance(value, tuple) else value
    return entry


# ---------------------------------------------------------------------------------------------- vLLM


def _vllm_value_kind(type_name: str | None, flag: str) -> str:
    """The value kind of a vLLM type callable, by the names `dump_vllm_args.py` records (see its `_type_name`)."""
    name = type_name or "str"
    for marker, kind in (
        ("human_readable_int_or_auto", "len_auto"),
        ("human_readable_int", "len"),
        ("union_dict_and_str", "json_or_str"),
        ("parse_dataclass", "json"),
        ("parse_type", "json"),
        ("loads", "json"),
    ):
        if marker in name:
            return kind
    base = re.sub(r"^optional_type\.<locals>\._optional_type\((.*)\)$", r"\1", name)
    if base in ("int", "float", "str"):
        return base
    if base == "bool" or base.endswith("<lambda>"):  # type=bool keeps any text truthy; lambdas split or lower text
        return "str"
    raise SystemExit(f"{flag}: unknown vLLM type callable {type_name!r}: teach _vllm_value_kind about it")


def vllm_table(dump: dict[str, Any]) -> dict[str, Any]:
    """A vLLM table from one `dump_vllm_args.py` dump (every option of `vllm serve` but -h/--help)."""
    flags = []
    for action in dump["actions"]:
        options = action["option_strings"]
        if not options or action["action"] == "_HelpAction":
            continue  # the positional model tag, and --help
        negations = [o for o in options if o.startswith("--no-")]
        names = [o for o in options if o not in negations]
        canonical = next(o for o in names if o.startswith("--"))
        name = canonical[2:]
        aliases = [o for o in names if o != canonical]
        help_text = action["help"] or ""
        choices = [c for c in action["choices"] or [] if c is not None]
        nargs = action["nargs"]
        kind_of_value = _vllm_value_kind(action["type"], canonical)
        common: dict[str, Any] = {
            "aliases": aliases,
            "serving": name in SERVING["vllm"],
            "deprecated": bool(action.get("deprecated"))
            or _deprecated(help_text)
            or action["action"].startswith("Deprecated"),
            "help": _first_sentence(help_text),
        }
        dest = action["dest"]
        if dest != name.replace("-", "_"):
            common["dest"] = dest
        if action["action"] == "BooleanOptionalAction":
            entry = _spec(name, "bool", negations=negations, **common)
        elif action["action"] in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction"):
            entry = _spec(name, "flag", **common)
        elif action["action"] == "_AppendAction":
            entry = _spec(name, "append", item=kind_of_value, choices=choices, **common)
        elif nargs in ("+", "*"):
            entry = _spec(name, "list", item=kind_of_value, nargs=nargs, choices=choices, **common)
        elif choices:
            entry = _spec(name, "choice", choices=choices, **common)
        elif nargs == "?":
            entry = _spec(name, kind_of_value, nargs="?", **common)
        elif nargs is None:
            entry = _spec(name, kind_of_value, **common)
        else:
            raise SystemExit(f"{canonical}: nargs={nargs!r} is not modelled")
        flags.append(entry)
    syntax: dict[str, Any] = {"dotted_json": True}  # FlexibleArgumentParser: --json-flag.key value
    if any(f["name"] == "optimization-level" for f in flags):
        syntax["optimization_level"] = "optimization-level"  # -O3 / -O 3 (0.20 and later)
    return {
        "engine": "vllm",
        "version": dump["version"],
        "source": "vllm serve's argument parser, dumped by scripts/dump_vllm_args.py",
        "syntax": syntax,
        "flags": flags,
    }


# ----------------------------------------------------------------------------------------- llama.cpp


def _cxx_tokens(src: str) -> Iterator[tuple[str, str, int]]:
    """(kind, text, offset) tokens of C++ source: `str` (decoded literal), `char`, `punct`, `word`, comments
    dropped. Enough to walk llama.cpp's `add_opt(common_arg(...))` calls, strings and raw strings included."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i) if src.find("\n", i) != -1 else n
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 2
        elif src.startswith('R"', i):
            delim = src[i + 2 : src.index("(", i)]
            end = src.index(f'){delim}"', i)
            yield "str", src[src.index("(", i) + 1 : end], i
            i = end + len(delim) + 2
        elif c == '"':
            j, out = i + 1, []
            while src[j] != '"':
                if src[j] == "\\":
                    out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}.get(src[j + 1], src[j + 1]))
                    j += 2
                else:
                    out.append(src[j])
                    j += 1
            yield "str", "".join(out), i
            i = j + 1
        elif c == "'":
            j = i + 1
            while src[j] != "'":
                j += 2 if src[j] == "\\" else 1
            yield "char", src[i : j + 1], i
            i = j + 1
        elif c.isalnum() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] in "_:"):
                j += 1
            yield "word", src[i:j], i
            i = j
        else:
            yield "punct", c, i
            i += 1


def _split_call(tokens: list[tuple[str, str, int]], start: int) -> tuple[list[list[tuple[str, str, int]]], int]:
    """The top-level comma-separated arguments of the call whose `(` is tokens[start], and the index after `)`."""
    depth, args, current = 0, [], []
    i = start
    while True:
        kind, text, _ = tokens[i]
        if kind == "punct" and text in "([{":
            depth += 1
            if depth > 1:
                current.append(tokens[i])
        elif kind == "punct" and text in ")]}":
            depth -= 1
            if depth == 0:
                args.append(current)
                return args, i + 1
            current.append(tokens[i])
        elif kind == "punct" and text == "," and depth == 1:
            args.append(current)
            current = []
        else:
            current.append(tokens[i])
        i += 1


def _strings(arg: list[tuple[str, str, int]]) -> list[str]:
    return [text for kind, text, _ in arg if kind == "str"]


def _help_text(arg: list[tuple[str, str, int]]) -> str:
    """The literal text of a help expression: its first run of adjacent literals (a `string_format`'s format;
    the first branch of a `cond ? a : b`), with conversions (`%d`, `%s`, `%.2f`) shown as `…`: the defaults
    they print depend on the build and the example."""
    start = next((i for i, (kind, _, _) in enumerate(arg) if kind == "str"), len(arg))
    end = next((i for i in range(start, len(arg)) if arg[i][0] != "str"), len(arg))
    text = "".join(t for _, t, _ in arg[start:end])
    return re.sub(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXeEfFgGcsp]", "…", text).replace("%%", "%")


_CHOICES = re.compile(r"^[{\[<]?([A-Za-z0-9_.+-]+(?:\s*[,|]\s*[A-Za-z0-9_.+-]+)+)[}\]>]?$")


def _llamacpp_entry(args: list[list[tuple[str, str, int]]], chain: str, named: dict[str, str]) -> dict[str, Any] | None:
    """One `common_arg(...)` with its `.set_*()` chain as a table entry; None when llama-server lacks it.
    `named` holds the example lists arg.cpp names (`mmproj_examples`), by name."""
    examples = re.search(r"set_examples\((?:\{([^}]*)\}|(\w+))", chain)
    excludes = re.search(r"set_excludes\(\{([^}]*)\}", chain)
    ex = (examples.group(1) or named[examples.group(2)]) if examples else "LLAMA_EXAMPLE_COMMON"
    if not re.search(r"\bLLAMA_EXAMPLE_(?:COMMON|SERVER)\b", ex):
        return None
    if excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1):
        return None
    if "set_preset_only(" in chain:
        return None  # not a command-line flag
    options = _strings(args[0])
    handler = args[-1]
    signature = re.search(r"\]\s*\(([^)]*)\)", " ".join(t for _, t, _ in handler))
    params = [p.strip() for p in signature.group(1).split(",")] if signature else []
    body = " ".join(json.dumps(t) if k == "str" else t for k, t, _ in handler)
    long = [o for o in options if o.startswith("--")]
    canonical = (long or options)[0]
    name = canonical.lstrip("-")
    if name == "help":
        return None  # as for vLLM: not a server setting
    aliases = [o for o in options if o != canonical]
    help_arg = args[-2]
    help_text = _help_text(help_arg)
    common = {
        "aliases": aliases,
        "serving": name in SERVING["llamacpp"],
        "deprecated": _deprecated(help_text),
        "help": _first_sentence(help_text.split("\n")[0]),
    }
    if any(t == "bool" for p in params for t in p.split()):
        negations = _strings(args[1])
        return _spec(name, "bool", negations=negations, **common)
    if len(params) == 1:
        return _spec(name, "flag", **common)
    if len(params) == 3:  # two values: `--control-vector-layer-range START END`
        return _spec(name, "list", item="str", nargs=2, **common)
    if "int" in params[1].split():
        return _spec(name, "int", **common)
    hint = (_strings(args[1]) or [""])[0].strip()  # the value hint: "N", "FNAME", "{none,linear,yarn}", "<0|1>"
    choices = _CHOICES.match(hint)
    if choices and ".." not in hint and ("|" in hint or hint[:1] in "{[<"):
        values = [v.strip() for v in re.split(r"[,|]", choices.group(1))]
        return _spec(name, "choice", choices=values, **common)
    if re.search(r"\b(?:push_back|emplace_back)\s*\(\s*value\s*\)", body):
        return _spec(name, "append", item="str", **common)
    if re.search(r"std::sto[fd]\s*\(\s*value\s*\)", body):
        return _spec(name, "float", **common)
    if re.search(r"std::sto(?:i|l|ul|ll|ull)\s*\(\s*value\s*\)", body) and not re.search(r'value\s*=\s*=\s*"', body):
        return _spec(name, "int", **common)
    return _spec(name, "str", **common)


def _arg_cpp(source: Path) -> tuple[str, str | None]:
    """common/arg.cpp's text and the xllamacpp version when `source` is xllamacpp's sdist."""
    if source.suffixes[-2:] == [".tar", ".gz"]:
        with tarfile.open(source) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("thirdparty/llama.cpp/common/arg.cpp"))
            data = tar.extractfile(member)
            assert data is not None
            version = re.search(r"xllamacpp-([\d.]+)\.tar\.gz$", source.name)
            return data.read().decode(), version.group(1) if version else None
    return source.read_text(), None


def llamacpp_table(source: Path, build: str | None) -> dict[str, Any]:
    """llama-server's flags from llama.cpp's `common/arg.cpp` (`common_params_parser_init` for the server)."""
    text, xllamacpp = _arg_cpp(source)
    if build is None and xllamacpp:
        build = f"b{xllamacpp.rsplit('.', 1)[-1]}"  # xllamacpp YYYY.M.BUILD bundles llama.cpp bBUILD
    if build is None:
        raise SystemExit("llamacpp: say which llama.cpp build arg.cpp is from (--build bNNNN)")
    tokens = list(_cxx_tokens(text))
    named = dict(re.findall(r"initializer_list<enum llama_example>\s+(\w+)\s*=\s*\{([^}]*)\}", text))
    flags: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(tokens) - 3:
        if tokens[i][1] == "add_opt" and tokens[i + 1][1] == "(" and tokens[i + 2][1] == "common_arg":
            args, after = _split_call(tokens, i + 3)
            _, end = _split_call(tokens, i + 1)
            chain = "".join(t if k != "str" else json.dumps(t) for k, t, _ in tokens[after : end - 1])
            entry = _llamacpp_entry(args, chain, named)
            if entry and entry["name"] not in flags:  # first definition wins (the server branch comes first)
                flags[entry["name"]] = entry
            i = end
        else:
            i += 1
    table: dict[str, Any] = {
        "engine": "llamacpp",
        "version": build,
        "syntax": {"value_always_next": True},  # common_params_parse_ex: a value is always the next word
        "source": f"llama.cpp {build} common/arg.cpp" + (f", as bundled by xllamacpp {xllamacpp}" if xllamacpp else ""),
        "flags": list(flags.values()),
    }
    supported, extra = _launcher_subset(table["flags"])
    table["subsets"] = {"xllamacpp-launcher": supported}
    if extra:
        table["notes"] = [
            "servetune's xllamacpp launcher (engines/llamacpp_server.py) also takes "
            + ", ".join(extra)
            + ", which llama-server itself does not"
        ]
    return table


def _launcher_subset(flags: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The canonical names of the llama-server flags servetune's xllamacpp launcher (`engines/llamacpp_server.py`)
    takes, and the launcher's options llama-server lacks."""
    sys.path.insert(0, str(ROOT / "src"))
    from servetune.engines.llamacpp_server import parser

    by_option = {
        o: f["name"] for f in flags for o in [f"--{f['name']}", *f.get("aliases", []), *f.get("negations", [])]
    }
    names, extra = set(), []
    for action in parser()._actions:
        if not action.option_strings or action.dest == "help":
            continue
        known = [by_option[o] for o in action.option_strings if o in by_option]
        names.update(known[:1])
        extra += [o for o in action.option_strings if o not in by_option]
    return sorted(names), extra


# -------------------------------------------------------------------------------------------- SGLang


def _sglang_sources(source: Path) -> tuple[dict[str, str], str | None]:
    """{relative path: text} of sglang/srt/server_args.py and arg_groups/fields/*.py, plus the version."""
    wanted = re.compile(r"sglang/srt/(?:server_args\.py|arg_groups/fields/[a-z_]+\.py)$")
    files: dict[str, str] = {}
    version = None
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as whl:
            for name in whl.namelist():
                if wanted.search(name):
                    files[name] = whl.read(name).decode()
        found = re.match(r"sglang-([^-]+)-", source.name)
        version = found.group(1) if found else None
    else:
        for path in source.rglob("*.py"):
            rel = path.relative_to(source).as_posix()
            if wanted.search(rel):
                files[rel] = path.read_text()
    if not any(name.endswith("server_args.py") for name in files):
        raise SystemExit(f"{source}: no sglang/srt/server_args.py")
    return files, version


def _literal(node: ast.expr | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _unwrap_optional(node: ast.expr) -> ast.expr:
    """`Optional[X]` / `X | None` / `Union[X, None]` → X (other unions stay as they are)."""
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Optional":
        return node.slice
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Union" and isinstance(node.slice, ast.Tuple):
        rest = [e for e in node.slice.elts if ast.unparse(e) != "None"]
        return rest[0] if len(rest) == 1 else node
    if isinstance(node, ast.BinOp) and "None" in (ast.unparse(node.left), ast.unparse(node.right)):
        return node.left if ast.unparse(node.right) == "None" else node.right
    return node


def _sglang_kind(annotation: ast.expr, meta: dict[str, ast.expr]) -> tuple[str, dict[str, Any]]:
    """The kind of one `A[T, Arg(...)]` field, in the order of `add_cli_args_from_dataclass`
    (arg_groups/arg_utils.py): custom action, Literal, List, bool, scalar. One liberty: a dict-typed field
    SGLang reads as a JSON string is kind `json` (`json_or_str` when it also takes a plain name)."""
    action = ast.unparse(meta["action"]) if "action" in meta else None
    parser_name = ast.unparse(meta["type_parser"]) if "type_parser" in meta else None
    choices = _literal(meta.get("choices"))
    nargs = _literal(meta.get("nargs"))
    if action:
        if action.endswith("BooleanOptionalAction"):
            return "bool", {}
        if action.endswith("LoRAPathAction"):
            return "list", {"item": "str", "nargs": nargs or "*"}
        raise SystemExit(f"SGLang action {action} is not modelled")
    inner = _unwrap_optional(annotation)
    head = ast.unparse(inner.value) if isinstance(inner, ast.Subscript) else ast.unparse(inner)
    if head == "Literal":
        assert isinstance(inner, ast.Subscript)
        values = _literal(inner.slice)
        values = list(values) if isinstance(values, tuple) else [values]
        return "choice", {"choices": choices or [v for v in values if v is not None]}
    if head in ("List", "list") and parser_name is None:
        assert isinstance(inner, ast.Subscript)
        item = ast.unparse(inner.slice)
        return "list", {"item": item if item in ("int", "float") else "str", "nargs": nargs or "+", "choices": choices}
    if head == "bool":
        return "flag", {}
    if parser_name:
        kind = {"json.loads": "json", "json_list_type": "json", "human_readable_int": "len_si"}.get(parser_name, "str")
    elif re.search(r"\b[Dd]ict\b", ast.unparse(inner)):
        union = inner.slice if head == "Union" and isinstance(inner, ast.Subscript) else None
        members = union.elts if isinstance(union, ast.Tuple) else []
        kind = "json_or_str" if any(ast.unparse(m) == "str" for m in members) else "json"
    else:
        kind = head if head in ("int", "float") else "str"
    if nargs in ("+", "*"):
        return "list", {"item": "str" if kind != "int" else "int", "nargs": nargs, "choices": choices}
    if choices:
        return "choice", {"choices": [c for c in choices if c is not None]}
    return kind, {"nargs": nargs}


def _sglang_field(node: ast.AnnAssign) -> dict[str, Any] | None:
    annotation = node.annotation
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "A"):
        return None
    assert isinstance(node.target, ast.Name)
    elts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    meta: dict[str, ast.expr] = {}
    help_text = ""
    for extra in elts[1:]:
        if isinstance(extra, ast.Call) and ast.unparse(extra.func) == "Arg":
            meta = {k.arg: k.value for k in extra.keywords if k.arg}
            help_text = _help_of(meta.get("help"))
            break
        if isinstance(extra, ast.Constant) and isinstance(extra.value, str):
            help_text = extra.value
            break
        if isinstance(extra, ast.BinOp | ast.JoinedStr):
            help_text = _help_of(extra)
            break
    else:
        return None  # no CLI metadata: not registered by add_cli_args_from_dataclass
    if _literal(meta.get("no_cli")) is True:
        return None
    field = node.target.id
    cli = _literal(meta.get("cli_name")) or f"--{field.replace('_', '-')}"
    kind, extra_fields = _sglang_kind(elts[0], meta)
    name = cli[2:]
    entry = _spec(
        name,
        kind,
        aliases=_literal(meta.get("aliases")) or [],
        negations=[f"--no-{name}"] if kind == "bool" else [],
        **{k: v for k, v in extra_fields.items() if v is not None},
        serving=name in SERVING["sglang"],
        deprecated=_deprecated(help_text),
        help=_first_sentence(help_text),
        dest=field if field != name.replace("-", "_") else None,
    )
    return entry


def _help_of(node: ast.expr | None) -> str:
    """The literal parts of a help expression (f-string holes and names left out)."""
    if node is None:
        return ""
    parts = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return "".join(parts)


def _manual_arguments(tree: ast.Module) -> Iterator[dict[str, Any]]:
    """`parser.add_argument(...)` calls in `ServerArgs.add_cli_args` (dynamic choices, deprecated flags)."""
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "ServerArgs"):
            continue
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "add_cli_args"):
                continue
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and ast.unparse(call.func).endswith(".add_argument"):
                    yield _argument_entry(call)


def _argument_entry(call: ast.Call) -> dict[str, Any]:
    options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    canonical = next(o for o in options if o.startswith("--"))
    name = canonical[2:]
    action = ast.unparse(kw["action"]) if "action" in kw else ""
    help_text = _help_of(kw.get("help"))
    type_name = ast.unparse(kw["type"]) if "type" in kw else "str"
    nargs = _literal(kw.get("nargs"))
    extra: dict[str, Any]
    if "BooleanOptionalAction" in action:
        kind, extra = "bool", {"negations": [f"--no-{name}"]}
    elif (
        "StoreTrue" in action
        or "store_true" in action
        or ("StoreConst" in action and nargs is None and "choices" not in kw)
    ):
        kind, extra = "flag", {}
    elif "choices" in kw:
        kind, extra = "choice", {"choices": _literal(kw["choices"])}
    elif nargs in ("+", "*"):
        kind, extra = "list", {"item": type_name if type_name in ("int", "float") else "str", "nargs": nargs}
    else:
        kind, extra = (type_name if type_name in ("int", "float") else "str"), {}
    if extra.get("choices") is None and "choices" in kw:
        extra["choices"] = None  # computed when SGLang runs (parsers, backends): any text is passed on
        kind = "str"
    return _spec(
        name,
        kind,
        aliases=[o for o in options if o != canonical],
        **extra,
        serving=name in SERVING["sglang"],
        deprecated="Deprecated" in action or _deprecated(help_text),
        help=_first_sentence(help_text),
    )


def sglang_table(source: Path, version: str | None) -> dict[str, Any]:
    """SGLang's `launch_server` flags: the `A[T, Arg(...)]` fields of the namespaces ServerArgs collects
    (arg_groups/fields/*.py, registered by `add_cli_args_from_dataclass`) plus `add_cli_args`' own calls."""
    files, found = _sglang_sources(source)
    version = version or found
    if version is None:
        raise SystemExit("sglang: say which version the source is (--version X.Y.Z)")
    flags: dict[str, dict[str, Any]] = {}
    for rel in sorted(files):
        tree = ast.parse(files[rel])
        if rel.endswith("server_args.py"):
            entries: Iterable[dict[str, Any]] = _manual_arguments(tree)
            legacy = [
                n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"
            ]  # SGLang before arg_groups declared its fields on ServerArgs itself
            entries = [*entries, *_class_fields(legacy)]
        else:
            namespaces = [
                n
                for n in tree.body
                if isinstance(n, ast.ClassDef)
                and any(isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "_NS_PATH" for s in n.body)
            ]
            entries = _class_fields(namespaces)
        for entry in entries:
            if entry["name"] in flags:
                raise SystemExit(f"sglang: --{entry['name']} is declared twice")
            flags[entry["name"]] = entry
    return {
        "engine": "sglang",
        "version": version,
        "source": f"SGLang {version} python/sglang/srt/server_args.py + arg_groups/fields, read with ast",
        "flags": sorted(flags.values(), key=lambda f: f["name"]),
    }


def _class_fields(classes: list[ast.ClassDef]) -> list[dict[str, Any]]:
    out = []
    for cls in classes:
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                entry = _sglang_field(node)
                if entry:
                    out.append(entry)
    return out


# ------------------------------------------------------------------------------------------- writing


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _changes(older: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """What `newer` changed against `older`: added, removed, renamed (old → new) and kind changes."""
    old = {f["name"]: f for f in older["flags"]}
    new = {f["name"]: f for f in newer["flags"]}
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    renamed: dict[str, str] = {}
    for name in removed:
        dest = old[name].get("dest", name.replace("-", "_"))
        for candidate in added:
            f = new[candidate]
            if f.get("dest", candidate.replace("-", "_")) == dest or f"--{name}" in f.get("aliases", []):
                renamed[name] = candidate
        for candidate, f in new.items():
            if f"--{name}" in f.get("aliases", []):
                renamed[name] = candidate
    kinds = {
        n: f"{old[n]['kind']} -> {new[n]['kind']}"
        for n in sorted(set(old) & set(new))
        if old[n]["kind"] != new[n]["kind"]
    }
    return {
        "since": older["version"],
        "added": [n for n in added if n not in renamed.values()],
        "removed": [n for n in removed if n not in renamed],
        "renamed": renamed,
        "kind_changed": kinds,
    }


def _dump(table: dict[str, Any]) -> str:
    """JSON with one flag per line, so that `git diff` between versions reads flag by flag."""
    head = {k: v for k, v in table.items() if k != "flags"}
    head["count"] = len(table["flags"])
    out = io.StringIO()
    out.write("{\n")
    for key, value in head.items():
        out.write(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},\n")
    out.write(' "flags": [\n')
    out.write(",\n".join("  " + json.dumps(f, ensure_ascii=False) for f in table["flags"]))
    out.write("\n ]\n}\n")
    return out.getvalue()


def write(table: dict[str, Any]) -> Path:
    """Writes one table, then refreshes the `changes` block of every table of that engine."""
    TABLES.mkdir(parents=True, exist_ok=True)
    name = table["engine"] if table["version"] is None else f"{table['engine']}-{table['version']}"
    path = TABLES / f"{name}.json"
    path.write_text(_dump(table))
    if table["version"] is not None:
        paths = sorted(TABLES.glob(f"{table['engine']}-*.json"), key=lambda p: _version_key(p.stem.split("-", 1)[1]))
        tables = [json.loads(p.read_text()) for p in paths]
        for older, newer, p in zip([None, *tables[:-1]], tables, paths, strict=True):
            newer.pop("count", None)
            newer.pop("changes", None)
            if older is not None:
                flags = newer.pop("flags")
                newer["changes"] = _changes(older, {**newer, "flags": flags})
                newer["flags"] = flags
            p.write_text(_dump(newer))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="engine", required=True)
    v = sub.add_parser("vllm", help="tables from dump_vllm_args.py dumps")
    v.add_argument("dumps", nargs="+", type=Path)
    ll = sub.add_parser("llamacpp", help="the llama-server table from common/arg.cpp or xllamacpp's sdist")
    ll.add_argument("source", type=Path)
    ll.add_argument("--build", help="llama.cpp build (bNNNN); read from the sdist's name when not given")
    sg = sub.add_parser("sglang", help="the SGLang table from its source folder or wheel")
    sg.add_argument("source", type=Path)
    sg.add_argument("--version")
    args = p.parse_args(argv)
    if args.engine == "vllm":
        tables = [vllm_table(json.loads(d.read_text())) for d in args.dumps]
    elif args.engine == "llamacpp":
        tables = [llamacpp_table(args.source, args.build)]
    else:
        tables = [sglang_table(args.source, args.version)]
    for table in tables:
        print(f"{write(table).relative_to(ROOT)}: {len(table['flags'])} flags")
    return 0


if __name__ == "__main__":
    sys.exit(main())
