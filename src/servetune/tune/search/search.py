"""Bayesian search over engine flags as ask/tell (Optuna TPE), within a budget of GPU-minutes; or the same
ask/tell over points drawn at random (`sampler: random`, Optuna's RandomSampler), the baseline TPE must beat.

The runner asks for a point, the planner may reject it before any launch (told as failed, costs nothing),
otherwise the runner measures it and tells the objective (or None for a failure or an SLO miss, which TPE
then avoids).  On `--resume` the finished trials are replayed from the store, so the study continues where
it stopped instead of starting over.

Several trials in flight (an executor with several slots asks again before the first answer): the asked, not
yet told trials stay open in the study, and TPE's constant liar (`constant_liar=True`) counts each as if it had
the worst value seen, so the next point is not drawn on top of one being measured. With one trial at a time
nothing is pending and the liar changes nothing. Open trials count against `max_trials`; the GPU-minutes budget
is checked on finished trials only, so a cluster can overshoot it by the trials in flight when it is reached."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servetune.tune.schema.experiment import Dim, Search

Feasible = Callable[[dict[str, Any]], list[str]]
"""Reasons a point cannot run (empty = it can): the planner's verdict."""

_MAX_REJECTED_IN_A_ROW = 200
_BAD = "servetune_infeasible"


def _violation(trial: Any) -> tuple[float]:
    """Optuna constraint: > 0 means the point could not run or missed the SLOs."""
    return (1.0 if trial.user_attrs.get(_BAD) else 0.0,)


def _distribution(dim: Dim) -> Any:
    import optuna

    if dim.int_range is not None:
        return optuna.distributions.IntDistribution(dim.int_range[0], dim.int_range[1], log=dim.log)
    if dim.float_range is not None:
        return optuna.distributions.FloatDistribution(dim.float_range[0], dim.float_range[1], log=dim.log)
    return optuna.distributions.CategoricalDistribution(_hashable(dim.choice or []))


def _hashable(values: list[Any]) -> list[Any]:
    # Optuna's categorical choices must be None/bool/int/float/str: JSON values (speculative configs) go as text.
    import json

    return [json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v for v in values]


def _decode(space: dict[str, Dim], params: dict[str, Any]) -> dict[str, Any]:
    import json

    out = {}
    for name, value in params.items():
        choices = space[name].choice
        if choices is not None and isinstance(value, str) and any(isinstance(c, dict | list) for c in choices):
            value = json.loads(value) if value.startswith(("{", "[")) else value
        out[name] = value
    return out


class SearchSession:
    """An Optuna study driven from outside: `ask()` → point, `tell(point, value)` after measuring it."""

    def __init__(self, search: Search, goal: str, feasible: Feasible | None = None) -> None:
        import warnings

        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        self.search = search
        self.goal = goal
        self.feasible = feasible
        self.spent_gpu_minutes = 0.0
        self.trials = 0
        self.rejected: list[tuple[dict[str, Any], list[str]]] = []
        self._distributions = {name: _distribution(dim) for name, dim in search.space.items()}
        sampler = (
            optuna.samplers.RandomSampler(seed=search.seed)
            if search.sampler == "random"
            else optuna.samplers.TPESampler(
                seed=search.seed,
                n_startup_trials=min(5, search.max_trials),
                constraints_func=_violation,
                constant_liar=True,
            )
        )
        self._study = optuna.create_study(direction="maximize" if goal == "max" else "minimize", sampler=sampler)
        self._open: dict[str, Any] = {}

    def replay(self, point: dict[str, Any], value: float | None, gpu_minutes: float) -> None:
        """Adds a trial finished in an earlier session (from the store)."""
        import optuna

        params = {k: _hashable([v])[0] for k, v in point.items() if k in self._distributions}
        self._study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions=self._distributions,
                value=self._worst() if value is None else value,
                user_attrs={_BAD: value is None},
            )
        )
        self.trials += 1
        self.spent_gpu_minutes += gpu_minutes

    def exhausted(self) -> bool:
        trials = self.trials + len(self._open)
        return trials >= self.search.max_trials or self.spent_gpu_minutes >= self.search.budget_gpu_minutes

    def ask(self) -> dict[str, Any] | None:
        """The next point worth measuring, or None when the budget or trial count is spent.  Points the
        planner rejects are told as failures on the spot and recorded in `rejected`."""
        for _ in range(_MAX_REJECTED_IN_A_ROW):
            if self.exhausted():
                return None
            trial = self._study.ask(self._distributions)
            point = _decode(self.search.space, trial.params)
            reasons = self.feasible(point) if self.feasible else []
            if reasons:
                self._tell_bad(trial)
                self.rejected.append((point, reasons))
                continue
            self._open[_point_key(point)] = trial
            return point
        return None

    def tell(self, point: dict[str, Any], value: float | None, gpu_minutes: float) -> None:
        """Reports a measured point: its objective value, or None when it failed or missed the SLOs."""
        trial = self._open.pop(_point_key(point))
        self.trials += 1
        self.spent_gpu_minutes += gpu_minutes
        if value is None:
            self._tell_bad(trial)
        else:
            self._study.tell(trial, value)

    def _tell_bad(self, trial: Any) -> None:
        """An infeasible or failed point: marked as violating a constraint (so TPE learns to avoid the
        region, which it would not from FAIL states) with the worst value seen as a placeholder."""
        trial.set_user_attr(_BAD, True)
        self._study.tell(trial, self._worst())

    def _worst(self) -> float:
        import optuna

        values = [
            t.value
            for t in self._study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
            if t.value is not None and not t.user_attrs.get(_BAD)
        ]
        if not values:
            return 0.0
        return min(values) if self.goal == "max" else max(values)


def _point_key(point: dict[str, Any]) -> str:
    import json

    return json.dumps(point, sort_keys=True, default=str)
