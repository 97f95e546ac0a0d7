"""Service-level objectives: the one owner of their keys, bounds and meaning.

Two kinds, both named as users write them:
- per request, vLLM's `--goodput` semantics (`Slos`): a completed request is good when it meets every bound that
  is set: ttft ≤ ttft_ms, tpot ≤ tpot_ms, e2el ≤ e2el_ms (and, beyond vLLM, the largest inter-chunk gap ≤
  max_itl_ms); a request with one output token has no TPOT and passes the TPOT bound, as in vLLM;
- per run, an experiment's `slos:` (`ttft_p99_ms`, `error_rate`, `memory_headroom_pct`, ...): bounds on a run's
  percentiles and rates. One run's figure is judged by `slo_miss` (the one comparison, both directions), a
  config's repeats by `missed_repeats` (the one rule across repeats: every repeat must meet the bound; see
  docs/metrics.md, "SLOs across repeats").

Every bound is checked where it is read, by the rules here: `slo_problem` for an experiment's `slos:` and for
`parse_slos` (a command line's `--slo NAME=VALUE`), `Slos` for `--goodput`; a latency bound is above 0 and at most
`MAX_LATENCY_MS`, a fraction at most 1, a headroom percentage below 100.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from servetune.errors import ServetuneError
from servetune.metrics.record import RequestRecord

MAX_LATENCY_MS = 86_400_000.0
"""The largest latency bound an SLO may set: a day. Every bound has a unit and a sane upper end (a fraction: 1; a
percentage of headroom: below 100); a latency past a day is a typo (`1e308`), and the alert thresholds and
goodput derived from it would mean nothing."""


class Slos(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_ms: float | None = Field(None, gt=0, le=MAX_LATENCY_MS, allow_inf_nan=False)
    tpot_ms: float | None = Field(None, gt=0, le=MAX_LATENCY_MS, allow_inf_nan=False)
    e2el_ms: float | None = Field(None, gt=0, le=MAX_LATENCY_MS, allow_inf_nan=False)
    max_itl_ms: float | None = Field(None, gt=0, le=MAX_LATENCY_MS, allow_inf_nan=False)

    def met_by(self, r: RequestRecord) -> bool:
        if not r.ok:
            return False
        if self.e2el_ms is not None and (r.done_ns - r.sent_ns) / 1e6 > self.e2el_ms:
            return False
        if not r.chunk_ns:
            return self.ttft_ms is None and self.tpot_ms is None and self.max_itl_ms is None
        if self.ttft_ms is not None and (r.chunk_ns[0] - r.sent_ns) / 1e6 > self.ttft_ms:
            return False
        tpot, gap = r.tpot_ns, r.max_itl_ns
        if self.tpot_ms is not None and tpot is not None and tpot / 1e6 > self.tpot_ms:
            return False
        return not (self.max_itl_ms is not None and gap is not None and gap / 1e6 > self.max_itl_ms)

    @classmethod
    def parse(cls, text: str) -> Slos:
        """vLLM's `--goodput` syntax: `ttft:500 tpot:50 e2el:10000` (milliseconds; spaces or commas)."""
        values: dict[str, float] = {}
        for item in text.replace(",", " ").split():
            name, _, value = item.partition(":")
            key = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms", "itl": "max_itl_ms"}.get(name)
            try:
                if key is None:
                    raise ValueError(name)
                values[key] = float(value)
            except ValueError:
                raise ServetuneError(
                    f"bad SLO {item!r}",
                    "write SLOs as name:milliseconds with names ttft, tpot, e2el, itl (e.g. ttft:500 tpot:50)",
                ) from None
        try:
            return cls(**values)
        except ValidationError as err:
            first = err.errors()[0]
            name = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el", "max_itl_ms": "itl"}[str(first["loc"][0])]
            raise ServetuneError(
                f"bad SLO {name}:{first['input']}: a latency bound must be a number of ms above 0 and at most "
                f"{MAX_LATENCY_MS:,.0f} (a day)",
                "write SLOs as name:milliseconds, e.g. ttft:500 tpot:50",
            ) from None


LATENCY_SLO_KEY = re.compile(r"^(ttft|tpot|itl|e2el)_p(50|90|95|99)_ms$")
"""A latency SLO: an upper bound on a percentile of a latency distribution, e.g. `ttft_p99_ms`."""
BOUNDS: dict[str, str] = {"error_rate": "upper", "memory_headroom_pct": "lower"}
"""The SLOs besides latency percentiles, and which way each bounds its figure."""


def is_latency_slo(key: str) -> bool:
    return LATENCY_SLO_KEY.match(key) is not None


def slo_problem(key: str, value: float) -> tuple[str, str] | None:
    """Why an SLO key or bound cannot be used (problem, fix), or None when it can. The one reading of SLO keys."""
    import difflib

    if not math.isfinite(value) or value < 0:
        return f"{key} = {value} is not a usable bound", "give a finite number ≥ 0"
    if LATENCY_SLO_KEY.match(key):
        if value <= 0:
            return f"{key} = {value} can never be met", "a latency bound must be above 0 ms"
        if value > MAX_LATENCY_MS:
            return f"{key} = {value:g} ms is more than a day", f"give the bound in ms, at most {MAX_LATENCY_MS:,.0f}"
        if key.startswith(("tpot", "itl")) and value < 0.05:
            return f"{key} = {value} ms is below any engine's step time", "give the bound in ms"
        return None
    if key == "error_rate":
        return (f"error_rate = {value} is not a fraction", "use 0..1 (0 = no failed request)") if value > 1 else None
    if key == "memory_headroom_pct":
        if value >= 100:
            return f"memory_headroom_pct = {value} can never be met", "use a percentage below 100"
        return None
    choices = ["ttft_p99_ms", "tpot_p99_ms", "itl_p99_ms", "e2el_p99_ms", "error_rate", "memory_headroom_pct"]
    close = difflib.get_close_matches(key, choices, n=1)
    hint = f"did you mean `{close[0]}`? " if close else ""
    return f"unknown SLO `{key}`", f"{hint}use {', '.join(choices)} (p50/p90/p95/p99)"


def parse_slos(items: Sequence[str], option: str = "--slo") -> dict[str, float]:
    """Run-level SLOs as a command line gives them (`ttft_p99_ms=500`, one per item), each judged by `slo_problem`
    like an experiment's `slos:`: the one reading of SLOs typed on a command line."""
    out: dict[str, float] = {}
    for item in items:
        key, equals, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not equals or not math.isfinite(value):
            raise ServetuneError(f"bad {option} {item!r}", f"write NAME=NUMBER, e.g. {option} ttft_p99_ms=500")
        problem = slo_problem(key.strip(), value)
        if problem is not None:
            raise ServetuneError(f"bad {option} {item!r}: {problem[0]}", problem[1])
        out[key.strip()] = value
    return out


def request_slos(slos: dict[str, float]) -> Slos | None:
    """The per-request bounds vLLM's goodput counts against (ttft/tpot/e2el), taken from the p99 SLOs."""
    bounds = {f"{name}_ms": slos[f"{name}_p99_ms"] for name in ("ttft", "tpot", "e2el") if f"{name}_p99_ms" in slos}
    return Slos(**bounds) if bounds else None


def wall_clock_slos(slos: dict[str, float], scale: float) -> dict[str, float]:
    """Latency bounds as wall-clock bounds against a server that runs `scale` simulated seconds per second
    (sim-serve's --time-scale); the error rate and the memory headroom do not scale."""
    return {k: v / scale if is_latency_slo(k) else v for k, v in slos.items()}


def slo_miss(key: str, value: float, bound: float, label: str | None = None, unit: str = "") -> str | None:
    """Why one measured value misses its SLO bound, in words (None when it meets it): latency percentiles and
    the error rate are upper bounds, `memory_headroom_pct` a lower one (`BOUNDS`). The one comparison of a figure
    with its bound, for one run and for each repeat of a config alike."""
    lower = BOUNDS.get(key) == "lower"
    if (value >= bound) if lower else (value <= bound):
        return None
    sign = "<" if lower else ">"
    if key == "error_rate":
        return f"error rate {value:.3f} {sign} {bound:g}"
    if label is None:
        return f"{key} {value:.1f} {sign} {bound:g}"
    return f"{label} {value:.1f}{unit} {sign} {bound:g}{unit} ({key})"


def missed_repeats(met: Sequence[bool]) -> str | None:
    """SLOs across repeats, the one rule: a config meets an SLO only when every repeat of it meets the SLO (a
    strict rule, so that "meets SLOs" holds of each run a user would see, not of a lucky one). The miss as
    "in 4 of 5 repeats" (None when every repeat met it; no repeat at all is a miss: nothing showed it)."""
    missed = sum(1 for m in met if not m)
    if met and not missed:
        return None
    return f"in {missed} of {len(met)} repeats" if met else "in no repeat measured"
