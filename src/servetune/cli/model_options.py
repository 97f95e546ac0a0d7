"""A command's typer options generated from its pydantic args model, so the model is the one owner of every
flag: its name, default, help, unit and bounds (GuideLLM's `registry_options_from_model` does the same for
click). A command declares a parameter annotated with its model and gets a validated instance:

    @app.command("serve")
    @model_options(ServeArgs)
    def serve_cmd(ctx: typer.Context, args: ServeArgs) -> None: ...

Each field becomes `--field-name` (underscores to dashes, a trailing `_s` unit suffix dropped and said in the
help as "seconds"), or the flags its `json_schema_extra` names (`{"flags": ["--port"]}`), or a positional
argument (`{"argument": True}`). The help is the field's description, then its unit and its bounds (pydantic's
`Field(gt=, ge=, lt=, le=)`); typer shows the default. Only the options the user gave reach the model, so its
defaults apply and `args.model_fields_set` says what was typed. The model validates once: a value out of
bounds, NaN or not a number is a `ServetuneError` naming the flag (exit 2), through the one translator.

A list field (`list[str]`, `tuple[float, ...]`) takes `a,b,c` and the flag repeated alike (`{"split": False}`
keeps commas in a value, e.g. `--metadata note=a,b`); a `Literal` field says its choices in the help and leaves
refusing another word to the model. Two word forms click does not read are rewritten before it parses, by
`ModelCommand` (give it as the command's `cls`): `{"nargs": "+"}` takes every word up to the next flag
(`--goodput ttft:500 tpot:50`, vLLM's spelling) and `{"nargs": "?", "const": "-"}` stands alone for its `const`
(`--json` alone: standard output). `{"off": ["--disable-tqdm"]}` adds spellings that set a switch off.
A `{"rest": True}` list field takes the words click does not know, in order (an engine's own flags after the
known options: `--max-model-len 32K -tp 2`), where the command has the `PASSTHROUGH` context settings.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import annotated_types
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from typer.core import TyperCommand

from servetune.errors import from_validation_error

R = TypeVar("R")
SCALARS: tuple[type, ...] = (bool, int, float, str, Path)
"""Field types an option can carry; a field of another type is excluded by name or refused at import."""
CONTEXT = "_model_options_ctx"
"""The context parameter added to a command that declares none."""
PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
"""The context settings of a command whose args model has a `rest` field (see the module docstring)."""
METAVARS = {int: "INTEGER", float: "NUMBER", str: "TEXT", Path: "PATH"}
UNITS = {"_s": "seconds", "_ms": "milliseconds", "_bytes": "bytes"}
"""Field-name suffixes that carry a unit: dropped from `_s` flags (`drain_s` → `--drain`), said in the help."""


@dataclass(frozen=True)
class CliField:
    """One model field as the command line sees it."""

    name: str
    kind: type
    optional: bool
    flags: tuple[str, ...]
    argument: bool
    help: str
    default: Any
    many: bool = False
    """A list: the flag repeated, or `a,b,c` (split on commas unless `split` is False)."""
    split: bool = True
    choices: tuple[str, ...] = ()
    nargs: str | None = None
    const: str | None = None
    off: tuple[str, ...] = ()
    rest: bool = False
    envvar: str | None = None
    negatable: bool = True
    """A switch has a `--no-` form where it is on by default (`{"negatable": ...}` says otherwise); one off by
    default is only the flag, as vLLM's store_true switches."""
    metavar: str | None = None


def model_options(
    model: type[BaseModel], *, exclude: Collection[str] = ()
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Replaces the decorated command's parameter annotated with `model` by one typer parameter per field of
    `model` (but `exclude`); the command is called with the validated instance in that parameter's place."""
    fields = cli_fields(model, exclude)

    def decorate(func: Callable[..., R]) -> Callable[..., R]:
        hints = get_type_hints(func)
        slot = next((n for n, t in hints.items() if t is model), None)
        if slot is None:
            raise TypeError(f"{func.__name__} has no parameter annotated {model.__name__}")
        own = [p for p in inspect.signature(func).parameters.values() if p.name != slot]
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own]
        ctx_name = next((p.name for p in params if p.annotation is typer.Context), None)
        if ctx_name is None:  # typer hands the context to a parameter of its type: the source of each value
            ctx_name = CONTEXT
            params.insert(
                0, inspect.Parameter(CONTEXT, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
            )
        params += [_parameter(f) for f in fields if not f.rest]

        @functools.wraps(func)
        def command(**given: Any) -> R:
            ctx = given[ctx_name] if ctx_name != CONTEXT else given.pop(CONTEXT)
            values = {f.name: _value(f, given.pop(f.name)) for f in fields if not f.rest and _typed(ctx, f.name)}
            for f in fields:
                given.pop(f.name, None)
                if f.rest and ctx.args:
                    values[f.name] = list(ctx.args)
            return func(**given, **{slot: parse_args(model, values, fields)})

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.cli_fields = fields  # type: ignore[attr-defined]  # read by ModelCommand (typer copies __dict__)
        return command

    return decorate


def parse_args(model: type[BaseModel], values: dict[str, Any], fields: list[CliField]) -> Any:
    """The model from command-line values; a bad value is a ServetuneError naming its flag."""
    try:
        return model.model_validate(values)
    except ValidationError as err:
        flags = {f.name: f.flags[0] if f.flags else f.name.upper() for f in fields}
        raise from_validation_error(err, name=lambda loc: flags.get(loc.split(".")[0], loc)) from None


def cli_fields(model: type[BaseModel], exclude: Collection[str]) -> list[CliField]:
    """The fields of `model` that the command line carries, in declaration order."""
    out = []
    for name, info in model.model_fields.items():
        if name in exclude:
            continue
        kind, optional, many, choices = _form(info.annotation)
        if kind is None:
            raise TypeError(f"{model.__name__}.{name}: {info.annotation} has no command-line form; exclude it")
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        argument = bool(extra.get("argument"))
        named = extra.get("flags")
        flags = () if argument else tuple(str(f) for f in named) if isinstance(named, list) else (_flag(name),)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        out.append(
            CliField(
                name,
                kind,
                optional,
                flags,
                argument,
                _help(name, info, choices, many, extra.get("split", True) is not False),
                list(default) if many and default is not None else default,
                many=many,
                split=extra.get("split", True) is not False,
                choices=choices,
                nargs=str(extra["nargs"]) if "nargs" in extra else None,
                const=str(extra["const"]) if "const" in extra else None,
                off=tuple(str(f) for f in extra.get("off", ()) or ()),  # type: ignore[union-attr]
                rest=bool(extra.get("rest")),
                envvar=str(extra["envvar"]) if "envvar" in extra else None,
                negatable=bool(extra.get("negatable", default is True)),
                metavar=str(extra["metavar"]) if "metavar" in extra else None,
            )
        )
    return out


def _form(annotation: Any) -> tuple[type | None, bool, bool, tuple[str, ...]]:
    """(the scalar type, whether None is allowed, whether a list of it, the choices of a `Literal`) of an
    annotation such as `float | None`, `tuple[float, ...]` or `Literal["a", "b"]`."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        kind, _, many, choices = _form(args[0]) if len(args) == 1 else (None, False, False, ())
        return kind, True, many, choices
    if origin is Literal:
        words = tuple(str(a) for a in get_args(annotation))
        return str, False, False, words
    if origin in (list, tuple):
        items = [a for a in get_args(annotation) if a is not Ellipsis]
        kind, _, many, choices = _form(items[0]) if len(set(items)) == 1 else (None, False, True, ())
        return (kind if not many else None), False, True, choices
    return (annotation, False, False, ()) if annotation in SCALARS else (None, False, False, ())


def _flag(name: str) -> str:
    return "--" + name.removesuffix("_s").replace("_", "-")


def _help(name: str, info: FieldInfo, choices: tuple[str, ...] = (), many: bool = False, split: bool = True) -> str:
    """The description, then the unit and the bounds, e.g. `Time between probes; seconds, > 0.`"""
    said = ["required"] if info.is_required() else []
    said += [unit for suffix, unit in UNITS.items() if name.endswith(suffix)]
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "unit" in extra:
        said.append(str(extra["unit"]))
    if choices:
        said.append(("each " if many else "") + "one of " + ", ".join(choices))
    if many:
        said.append("a,b or the flag repeated" if split else "the flag repeated")
    for bound in info.metadata:
        for kind, sign in ((annotated_types.Gt, ">"), (annotated_types.Ge, "≥"), (annotated_types.Lt, "<")):
            if isinstance(bound, kind):
                said.append(f"{sign} {getattr(bound, kind.__name__.lower())}")
        if isinstance(bound, annotated_types.Le):
            said.append(f"≤ {bound.le}")
    text = (info.description or "").strip().rstrip(".")
    return f"{text}; {', '.join(said)}." if said else f"{text}."


def _parameter(field: CliField) -> inspect.Parameter:
    """The typer parameter of a field. Every value but a switch reaches the command as the words typed, and the
    model converts them: a word that is not a number is the one translator's error naming the flag, like a bound."""
    shown = field.default is not None and field.default != []
    metavar = field.metavar or ("|".join(field.choices) if field.choices else METAVARS.get(field.kind, "TEXT"))
    kind: Any = str | None
    info: Any
    if field.kind is bool and not field.many and not field.argument:
        kind = bool
        name = field.flags[0].removeprefix("--")
        if not field.negatable:  # a switch that is only ever turned on (vLLM's `--save-result`)
            return inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=typer.Option(field.default, *field.flags, help=field.help),
                annotation=kind,
            )
        off = (" /" + "/".join(field.off),) if field.off else ()
        info = typer.Option(field.default, f"--{name}/--no-{name}", *field.flags[1:], *off, help=field.help)
    elif field.many:  # the words of every use of the flag; the commas are split before the model sees them
        kind = list[str] | None
        words = None if not field.default else [",".join(str(v) for v in field.default)]
        metavar += "..." if field.argument else ",..."
        if field.argument:
            info = typer.Argument(words, help=field.help, show_default=shown, metavar=field.name.upper() + "...")
        else:
            info = typer.Option(
                words, *field.flags, help=field.help, show_default=shown, metavar=metavar, envvar=field.envvar
            )
    elif field.argument:
        word = None if field.default is None else str(field.default)
        info = typer.Argument(word, help=field.help, show_default=shown, metavar=field.name.upper())
    else:
        word = None if field.default is None else str(field.default)
        info = typer.Option(
            word, *field.flags, help=field.help, show_default=shown, metavar=metavar, envvar=field.envvar
        )
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


def _value(field: CliField, given: Any) -> Any:
    """A list field's words, each `a,b,c` split (unless the field keeps commas)."""
    if not field.many or given is None:
        return given
    return [part.strip() for word in given for part in (word.split(",") if field.split else [word]) if part.strip()]


class ModelCommand(TyperCommand):
    """A command whose words are rewritten, before click parses them, into forms click reads: a `nargs="+"`
    field's words up to the next flag become one flag each for a list (`--metadata a=1 b=2` → `--metadata a=1
    --metadata b=2`), or one word (`--goodput ttft:500 tpot:50` → `--goodput 'ttft:500 tpot:50'`), and a
    `nargs="?"` field's flag with no value after it gets its `const` (`--json` → `--json -`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        fields: list[CliField] = getattr(self.callback, "cli_fields", [])
        return super().parse_args(ctx, spread_words(fields, args))


def spread_words(fields: list[CliField], args: list[str]) -> list[str]:
    """`ModelCommand`'s rewriting (see there); words after `--` are left as they are."""
    many = {flag: f for f in fields if f.nargs for flag in f.flags}
    out: list[str] = []
    words = list(args)
    while words:
        word = words.pop(0)
        out.append(word)
        if word == "--":
            out += words
            break
        field = many.get(word)
        if field is None:
            continue
        taken = []
        while words and not (words[0].startswith("-") and len(words[0]) > 1 and not _number(words[0])):
            taken.append(words.pop(0))
            if field.nargs == "?":
                break
        if field.nargs == "?":
            out.append(taken[0] if taken else str(field.const))
        elif not field.many:
            out.append(" ".join(taken))
        elif taken:
            out.append(taken[0])
            for extra in taken[1:]:
                out += [word, extra]
    return out


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _typed(ctx: typer.Context, name: str) -> bool:
    """The user gave this parameter (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"


M = TypeVar("M", bound=BaseModel)


def parse_words(model: type[M], words: list[str]) -> M:
    """The model a command line gives, read exactly as a command generated from `model` reads it: for code that
    holds words rather than a command (tests, benchmarks)."""
    taken: list[M] = []

    def take(args: Any) -> None:
        taken.append(args)

    take.__annotations__ = {"args": model, "return": None}
    app = typer.Typer(add_completion=False)
    app.command(cls=ModelCommand, context_settings=PASSTHROUGH)(model_options(model)(take))
    app(args=list(words), prog_name=model.__name__, standalone_mode=False)
    return taken[0]


def field_lines(model: type[BaseModel], names: Collection[str]) -> list[str]:
    """`--flag: help [default: x]` for some fields of `model` that another reader takes (an engine's own flags
    among its vLLM flags), for a command's help text."""
    out = []
    for name in names:
        info = model.model_fields[name]
        default = "" if info.is_required() or info.default is None else f" [default: {info.default}]"
        out.append(f"{_flag(name)}: {_help(name, info)}{default}")
    return out
