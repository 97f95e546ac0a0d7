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

from servetune.errors import from_validation_error

R = TypeVar("R")
SCALARS: tuple[type, ...] = (bool, int, float, str, Path)
"""Field types an option can carry; a field of another type is excluded by name or refused at import."""
CONTEXT = "_model_options_ctx"
"""The context parameter added to a command that declares none."""
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
        params += [_parameter(f) for f in fields]

        @functools.wraps(func)
        def command(**given: Any) -> R:
            ctx = given[ctx_name] if ctx_name != CONTEXT else given.pop(CONTEXT)
            values = {f.name: given.pop(f.name) for f in fields if _typed(ctx, f.name)}
            for f in fields:
                given.pop(f.name, None)
            return func(**given, **{slot: parse_args(model, values, fields)})

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
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
        kind, optional = _scalar(info.annotation)
        if kind is None:
            raise TypeError(f"{model.__name__}.{name}: {info.annotation} has no command-line form; exclude it")
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        argument = bool(extra.get("argument"))
        named = extra.get("flags")
        flags = () if argument else tuple(str(f) for f in named) if isinstance(named, list) else (_flag(name),)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        out.append(CliField(name, kind, optional, flags, argument, _help(name, info), default))
    return out


def _scalar(annotation: Any) -> tuple[type | None, bool]:
    """(the scalar type, whether None is allowed) of an annotation such as `float | None`."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        kind, _ = _scalar(args[0]) if len(args) == 1 else (None, False)
        return kind, True
    if get_origin(annotation) is Literal:
        return None, False
    return (annotation, False) if annotation in SCALARS else (None, False)


def _flag(name: str) -> str:
    return "--" + name.removesuffix("_s").replace("_", "-")


def _help(name: str, info: FieldInfo) -> str:
    """The description, then the unit and the bounds, e.g. `Time between probes; seconds, > 0.`"""
    said = [unit for suffix, unit in UNITS.items() if name.endswith(suffix)]
    for bound in info.metadata:
        for kind, sign in ((annotated_types.Gt, ">"), (annotated_types.Ge, "≥"), (annotated_types.Lt, "<")):
            if isinstance(bound, kind):
                said.append(f"{sign} {getattr(bound, kind.__name__.lower())}")
        if isinstance(bound, annotated_types.Le):
            said.append(f"≤ {bound.le}")
    text = (info.description or "").strip().rstrip(".")
    return f"{text}; {', '.join(said)}." if said else f"{text}."


def _parameter(field: CliField) -> inspect.Parameter:
    kind: Any = field.kind | None if field.optional or field.default is None else field.kind
    info: Any
    if field.argument:
        info = typer.Argument(
            field.default, help=field.help, show_default=field.default is not None, metavar=field.name.upper()
        )
    elif field.kind is bool:
        name = field.flags[0].removeprefix("--")
        info = typer.Option(field.default, f"--{name}/--no-{name}", *field.flags[1:], help=field.help)
    else:
        info = typer.Option(field.default, *field.flags, help=field.help, show_default=field.default is not None)
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


def _typed(ctx: typer.Context, name: str) -> bool:
    """The user gave this parameter (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"
