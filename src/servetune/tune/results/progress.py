"""Progress with an ETA: which variant, which probe and repeat, and how long the rest should take, from the
durations seen so far (per probe kind, and per engine launch)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

Emit = Callable[[str], None]


@dataclass
class Progress:
    """Counts planned work and times the finished work; `line()` says where the run is."""

    emit: Emit
    planned_runs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    planned_launches: int = 0
    done_runs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    done_launches: int = 0
    _run_s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    _launch_s: list[float] = field(default_factory=list)
    variants_total: int = 0
    variants_done: int = 0

    def plan(self, probes: list[str], repeats: int, launches: int, variants: int) -> None:
        for probe in probes:
            self.planned_runs[probe] += repeats
        self.planned_launches += launches
        self.variants_total += variants

    def launched(self, seconds: float) -> None:
        self.done_launches += 1
        self._launch_s.append(seconds)

    def variant_done(self) -> None:
        """A variant finished (done or failed)."""
        self.variants_done += 1

    def ran(self, probe: str, seconds: float) -> None:
        self.done_runs[probe] += 1
        self._run_s[probe].append(seconds)

    def skip(self, probe: str, repeats: int = 1) -> None:
        """Work that will not happen (resumed, failed variant, probe not applicable)."""
        self.planned_runs[probe] = max(self.done_runs[probe], self.planned_runs[probe] - repeats)

    def eta_s(self) -> float | None:
        every = [s for xs in self._run_s.values() for s in xs]
        if not every:
            return None
        overall = sum(every) / len(every)
        left = 0.0
        for probe, planned in self.planned_runs.items():
            remaining = max(planned - self.done_runs[probe], 0)
            times = self._run_s.get(probe)
            left += remaining * (sum(times) / len(times) if times else overall)
        if self._launch_s:
            left += max(self.planned_launches - self.done_launches, 0) * sum(self._launch_s) / len(self._launch_s)
        return left

    def say(self, variant: str, what: str) -> None:
        eta = self.eta_s()
        eta_text = "ETA ?" if eta is None else f"ETA {_clock(eta)}"
        self.emit(f"[{self.variants_done + 1}/{self.variants_total}] {variant} · {what} · {eta_text}")


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def stopwatch() -> Callable[[], float]:
    start = time.monotonic()
    return lambda: time.monotonic() - start
