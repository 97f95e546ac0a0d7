"""The checks of the files `servetune deploy` writes, shared by the deploy tests and the fuzz suite: the compose
specification's schema, kubernetes-validate, and the directives of the systemd unit (no input may add one)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

DATA = Path(__file__).parent / "data"


def validate_compose(path: Path) -> None:
    import jsonschema

    schema = json.loads((DATA / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load(path.read_text()))


def validate_kubernetes(path: Path) -> None:
    import kubernetes_validate

    for doc in (d for d in yaml.safe_load_all(path.read_text()) if d):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def unit_lines(unit: Path) -> list[tuple[str, str]]:
    """The (section, key) of every directive of a unit: what systemd will act on."""
    found, section = [], ""
    for line in unit.read_text().splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        found.append((section, line.partition("=")[0]))
    return found


UNIT_KEYS = [
    ("[Unit]", "Description"),
    ("[Unit]", "After"),
    ("[Unit]", "Wants"),
    ("[Service]", "Type"),
    ("[Service]", "User"),
    ("[Service]", "WorkingDirectory"),
    ("[Service]", "EnvironmentFile"),
    ("[Service]", "ExecStart"),
    ("[Service]", "KillSignal"),
    ("[Service]", "KillMode"),
    ("[Service]", "TimeoutStopSec"),
    ("[Service]", "Restart"),
    ("[Service]", "RestartSec"),
    ("[Install]", "WantedBy"),
]
