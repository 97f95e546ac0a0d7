"""When more load stops buying throughput: the one saturation rule, used by `bench --sweep`, the load-curve probe
(on a live server and in the simulator alike) and anything else that climbs a load ladder.

Judged from measured figures, not guessed: in closed loop, a level whose output throughput grew less than
`min_gain` over the best level before it (more concurrency only adds queueing); in open loop, a level where the
server completed less than `min_served` of the offered rate; in both, a level where more than `max_failed` of the
requests failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import Summary


@dataclass(frozen=True)
class Saturation:
    """A saturation rule with its thresholds (see the module docstring)."""

    min_gain: float = 0.05
    min_served: float = 0.9
    max_failed: float = 0.5

    def closed_loop_saturated(self, best_before: float | None, throughput: float) -> str | None:
        """Why a closed-loop level with this output throughput adds nothing over the best one before it."""
        if not best_before or best_before <= 0:
            return None
        gain = throughput / best_before - 1
        if gain < self.min_gain:
            return (
                f"output throughput grew {100 * gain:.1f}% (< {100 * self.min_gain:.0f}%) over the best level before it"
            )
        return None

    def judge(
        self,
        summary: Summary,
        records: list[RequestRecord],
        *,
        offered_rate: float | None,
        best_before: float | None,
    ) -> str | None:
        """Why a level is saturated, or None: failures, then (open loop) the served share, then the gain."""
        total = summary.completed + summary.failed
        if total and summary.failed / total > self.max_failed:
            return f"{summary.failed} of {total} requests failed"
        if offered_rate not in (None, float("inf")):
            served = served_ratio(records)
            if served is not None and served < self.min_served:
                return (
                    f"the server completed requests at {100 * served:.0f}% of the offered rate "
                    f"({offered_rate:g}/s offered)"
                )
        return self.closed_loop_saturated(best_before, summary.output_throughput)


SATURATION = Saturation()
"""The rule every command uses unless told otherwise."""


def served_ratio(records: list[RequestRecord]) -> float | None:
    """Completion rate / arrival rate of the measured requests, from their own spans (no Poisson noise): about 1
    while the server keeps up, below 1 when requests pile up."""
    done = sorted(r.done_ns for r in records if r.phase == "measure" and r.ok)
    sched = sorted(r.scheduled_ns for r in records if r.phase == "measure")
    if len(done) < 3 or sched[-1] == sched[0] or done[-1] == done[0]:
        return None
    return ((sched[-1] - sched[0]) / (len(sched) - 1)) / ((done[-1] - done[0]) / (len(done) - 1))
