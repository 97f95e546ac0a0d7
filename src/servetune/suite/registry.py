"""The suite's probes, found: every module of `servetune.suite.probes` registers its spec with
`spec.register` when imported, and this module, above them all, imports them once and answers by name. It sits
above the probes so that `spec.py`, which each probe imports, never imports a probe back.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from servetune.errors import ServetuneError
from servetune.suite.spec import REGISTRY, Figure, ProbeSpec


@cache
def _discover() -> None:
    from servetune.suite import probes as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def all_probes() -> dict[str, ProbeSpec]:
    """Every probe, in suite order."""
    _discover()
    return dict(sorted(REGISTRY.items(), key=lambda item: (item[1].order, item[0])))


def get_probe(name: str) -> ProbeSpec:
    import difflib

    probes = all_probes()
    if name not in probes:
        close = difflib.get_close_matches(name, probes, n=1)
        raise ServetuneError(
            f"unknown probe `{name}`", (f"did you mean `{close[0]}`? " if close else "") + f"use {', '.join(probes)}"
        )
    return probes[name]


def figure_spec(probe: str, figure: str) -> Figure | None:
    """A figure's spec by probe and name (None for a probe or figure no spec declares)."""
    spec = all_probes().get(probe)
    return spec.figure(figure) if spec else None


def named_objectives() -> dict[str, tuple[str, str]]:
    """`objective: NAME` shorthands → (probe, figure), from every probe's `objectives`."""
    return {name: (spec.name, figure) for spec in all_probes().values() for name, figure in spec.objectives.items()}
