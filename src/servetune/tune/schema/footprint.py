"""A tune suite's footprint, priced before anything launches: every run a probe makes (`ProbeSpec.loads`) by the
rule that prices a bench run (`load.options.shape_footprint`, `Footprint.check`), so that a typo such as
`requests_per_point: 999999999` is refused by `tune --check` and by the run alike, naming its key, instead of a
run that grows without bound.

Two limits, as `bench` and `estimate` have: the records of one probe run are kept in memory until its summary is
made (`MAX_RECORD_BYTES`), and one launch's suite — its warm-up requests, then every probe's runs times the
repeats — must finish within `SUITE_LIMIT_S` at `REQUESTS_PER_S`, a speed no engine beats on a suite's requests
(most are one at a time), so the bound refuses only what could never finish.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from servetune.errors import ServetuneError
from servetune.load.options import MAX_SECONDS, Footprint, shape_footprint
from servetune.sim.backend import REQUESTS_PER_S
from servetune.suite.registry import get_probe
from servetune.suite.requests import SINGLE, WARM_UP_TOKENS
from servetune.suite.spec import ProbeLoad
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.issues import Issue, KeyPath

SUITE_LIMIT_S = MAX_SECONDS
"""One launch's suite may take as long as any phase of a run may (a week)."""


def footprint_issues(exp: Experiment) -> Iterator[Issue]:
    """The suite's probe runs whose records would not fit, then a launch whose requests could not finish in time
    (each with the key that sized it and the fix)."""
    suite = exp.suite
    warm_up = shape_footprint(SINGLE, WARM_UP_TOKENS)
    # (requests of one launch, the key that sets them): warm-up requests, each a run of its own, then the probes
    parts: list[tuple[float, KeyPath, str]] = [
        (warm_up.requests * suite.warmup_requests, ("suite", "warmup_requests"), f"{suite.warmup_requests:,}")
    ]
    for name in suite.probes.enabled():
        params = suite.probes.params(name)
        if params is None:
            continue
        for load in get_probe(name).loads(params):
            size = shape_footprint(load.shape, load.output_tokens)
            key = _sizing_key(params, load)
            path: KeyPath = ("suite", "probes", name, *((key,) if key else ()))
            try:
                size.check(_sized_by(name, params, load), f"lower {_dotted(path)}")
            except ServetuneError as err:
                yield Issue(path, err.problem, err.fix or "")
                return
            parts.append((size.requests * suite.repeats, path, _sized_by(name, params, load)))
    total = Footprint.total(Footprint(requests=n, record_bytes=0.0) for n, _, _ in parts)
    biggest = max(parts, key=lambda part: part[0])
    sized_by = f"one launch's suite ({suite.repeats} repeats; the most from {_dotted(biggest[1])} {biggest[2]})"
    try:
        total.check(sized_by, f"lower {_dotted(biggest[1])}", REQUESTS_PER_S, SUITE_LIMIT_S)
    except ServetuneError as err:
        yield Issue(biggest[1], err.problem, err.fix or "")


def _sizing_key(params: BaseModel, load: ProbeLoad) -> str | None:
    """The parameter of `load` farthest above its default: the one a refusal points at (a typo's key)."""
    defaults = type(params)()  # a probe's parameters all have defaults (`probe: {}` runs it)

    def ratio(name: str) -> float:
        return _size(getattr(params, name)) / max(_size(getattr(defaults, name)), 1.0)

    return max(load.sized_by, key=ratio, default=None)


def _size(value: Any) -> float:
    """A parameter as a number: a list of levels by its largest, a list of anything else (the correctness
    probe's prompts, each one request) by its length."""
    if isinstance(value, list | tuple):
        if all(isinstance(v, int | float) for v in value):
            return float(max(value, default=0))
        return float(len(value))
    return float(value) if isinstance(value, int | float) else 0.0


def _sized_by(name: str, params: BaseModel, load: ProbeLoad) -> str:
    given = ", ".join(f"{key}: {getattr(params, key)}" for key in load.sized_by)
    return f"{name} ({given})" if given else name


def _dotted(path: KeyPath) -> str:
    return ".".join(str(p) for p in path)
