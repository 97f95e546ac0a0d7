"""Reads an experiment file and rejects a bad one before anything launches, naming the line and the fix.

YAML is parsed twice from the same text: once into plain data for pydantic, once into PyYAML's node tree,
which keeps the line of every key; a validation error's location (a path of keys) is looked up in that tree.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from servetune.errors import ServetuneError, from_validation_error, validation_fix
from servetune.tune.schema.checks import check_experiment
from servetune.tune.schema.experiment import ExecutorSpec, Experiment
from servetune.tune.schema.issues import Issue, KeyPath


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML keeps the last
    one silently: `parallel: 2` then `parallel: 4` would run 4 without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key `{key}` is given twice (first on line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def line_of(root: yaml.Node | None, path: KeyPath) -> int | None:
    """1-based line of the deepest node on `path` (the key's own line when the path ends at a key)."""
    node, line = root, None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    node, line = value, key.start_mark.line + 1
                    break
            else:
                return line if line is not None else _start(node)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line if line is not None else _start(node)
    return line if line is not None else _start(node)


def _start(node: yaml.Node | None) -> int | None:
    return None if node is None else node.start_mark.line + 1


def _dotted(path: KeyPath) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _pydantic_issues(err: ValidationError, data: Any) -> list[Issue]:
    issues = []
    for e in err.errors():
        path = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith(("function-", "tagged-"))))
        # Unions report one error per member; keep the path but drop the member's type name.
        path = tuple(p for p in path if p not in {"Objective", "str", "int", "float", "bool", "dict", "list", "none"})
        kind = e["type"]
        if kind == "extra_forbidden":
            name = str(path[-1])
            siblings = _fields_at(path[:-1])
            close = difflib.get_close_matches(name, siblings, n=1)
            fix = f"did you mean `{close[0]}`?" if close else f"allowed here: {', '.join(siblings) or '(none)'}"
            issues.append(Issue(path, f"unknown key `{name}`", fix))
        elif kind == "missing":
            issues.append(Issue(path, f"`{path[-1]}` is required here", f"add `{path[-1]}:`"))
        else:
            got = e.get("input")
            shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
            issues.append(Issue(path, f"{e['msg']}{shown}", _type_fix(e)))
    return _dedupe(issues)


def _type_fix(e: Mapping[str, Any]) -> str:
    """The fix of an experiment key's bad value (the one translator's, with the schema's page for the rest)."""
    return validation_fix(e, "this key") or "see docs/experiment.md for this key"


def _dedupe(issues: list[Issue]) -> list[Issue]:
    seen, out = set(), []
    for issue in issues:
        if (issue.path, issue.problem) not in seen:
            seen.add((issue.path, issue.problem))
            out.append(issue)
    return out


def _fields_at(path: KeyPath) -> list[str]:
    """The allowed keys of the model at a key path (for "did you mean")."""
    from pydantic import BaseModel

    model: Any = Experiment
    for part in path:
        if isinstance(part, int) or not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        model = _model_in(field.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def format_issues(source: str, root: yaml.Node | None, issues: list[Issue]) -> ServetuneError:
    """One error listing every issue as `file:line: key: problem` followed by its fix."""
    lines = []
    for issue in sorted(issues, key=lambda i: line_of(root, i.path) or 0):
        line = line_of(root, issue.path)
        where = f"{source}:{line}" if line else source
        lines.append(f"{where}: {_dotted(issue.path)}: {issue.problem}\n      fix: {issue.fix}")
    count = f"{len(issues)} problem{'s' if len(issues) > 1 else ''}"
    return ServetuneError(
        f"the experiment file is not valid ({count}; nothing was launched):\n  " + "\n  ".join(lines),
        "correct the lines above (the keys are documented in docs/experiment.md)",
    )


def parse_experiment(text: str, source: str = "<experiment>") -> Experiment:
    """Validates an experiment's YAML text: structure (pydantic), then flags, SLOs and consistency."""
    try:
        root = yaml.compose(text)
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ServetuneError(
            f"{where}: the experiment file is not valid YAML ({getattr(err, 'problem', err)})",
            "check the indentation and the `key: value` syntax on that line",
        ) from None
    if not isinstance(data, dict):
        raise ServetuneError(f"{source}: an experiment file must be a mapping of keys", "start from examples/tune/")
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as err:
        raise format_issues(source, root, _pydantic_issues(err, data)) from None
    experiment, issues = check_experiment(experiment)
    if issues:
        raise format_issues(source, root, issues)
    return experiment


def load_experiment(path: str | Path) -> Experiment:
    """Reads and validates an experiment file."""
    path = Path(path)
    if not path.is_file():
        raise ServetuneError(f"experiment file {path} does not exist", "give the path of a .yaml experiment file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ServetuneError(f"{path} is not a text file (not UTF-8)", "give a YAML experiment file") from None
    except OSError as err:
        raise ServetuneError(f"cannot read {path}: {err.strerror}", "check the file's permissions") from None
    return parse_experiment(text, str(path))


def with_executor(
    exp: Experiment,
    *,
    kind: str | None = None,
    gpus: str | None = None,
    address: str | None = None,
    resource: str | None = None,
) -> Experiment:
    """The experiment with the command line's executor options over its file's `executor:` (another kind starts
    from that kind's defaults). Where it runs is not the experiment's identity: a resume may change it."""
    given = {"gpus": gpus, "address": address, "resource": resource}
    if kind is None and all(v is None for v in given.values()):
        return exp
    spec = exp.executor
    data: dict[str, Any] = spec.model_dump(exclude_defaults=True) if kind in (None, spec.kind) else {}
    data.update({"kind": kind or spec.kind, **{k: v for k, v in given.items() if v is not None}})
    try:
        chosen = ExecutorSpec.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(
            err,
            where="executor options",
            fix="--executor local|local-gpus|ray|replay; --gpus IDS goes with local-gpus, --ray-address/--ray-resource"
            " with ray",
        ) from None
    return exp.model_copy(update={"executor": chosen})
