"""The experiment file: what to launch, which suite to run, the SLOs, the objective and the variants.

One pydantic model tree describes the YAML file; `servetune.tune.schema.loader` parses it with line numbers and
turns every validation problem into a `ServetuneError` that names the line and the fix.  The JSON schema
published in docs/experiment.schema.json is `Experiment.model_json_schema()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servetune.engines.config import EngineName
from servetune.engines.flagtable import FlagValue
from servetune.errors import ServetuneError
from servetune.hardware.gpus import GpuChoice, parse_gpu_arg
from servetune.load.backend import ClientSpec
from servetune.plan.placement import Placement, place
from servetune.suite.params import Probes
from servetune.suite.registry import figure_spec, named_objectives
from servetune.tune.schema.args import ExecutorKind


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineSpec(_Strict):
    """The base launch: every variant starts from these flags."""

    engine: EngineName = "vllm"
    model: str | None = Field(
        default=None, description="Model path as the engine takes it (a HF folder for vLLM, a .gguf for llama.cpp)."
    )
    command: str | None = Field(
        default=None,
        description="Instead of engine/model/flags: a launch command as pasted from a shell "
        "(`vllm serve MODEL --max-model-len 32k -tp 2`, `llama-server -m M.gguf -c 8192`).",
    )
    served_model_name: str | None = None
    flags: dict[str, FlagValue] = Field(default_factory=dict, description="Engine flags by their own names.")
    env: dict[str, str] = Field(default_factory=dict)
    version: str | None = Field(default=None, description="Engine version (for the planner and the report).")
    startup_timeout_s: float = Field(default=900.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _model_or_command(self) -> EngineSpec:
        if self.command is None and self.model is None:
            raise ValueError("give engine.model (with engine.flags), or engine.command (a pasted launch command)")
        if self.command is not None and (self.model is not None or self.flags):
            raise ValueError("give either engine.command or engine.model/engine.flags, not both")
        return self


class HardwareSpec(_Strict):
    """Where the engine runs: a catalog GPU and how many, or the CPU."""

    gpu: str | None = Field(
        default=None, description="GPU as `--gpu` takes it (H200, A100-80G-SXMx2, custom:...); null = CPU."
    )
    count: int | None = Field(default=None, ge=1, le=4096, description="How many (default: the xN of `gpu`, or 1).")

    def resolved(self) -> GpuChoice | None:
        """The GPU model and count (None on CPU); `gpu: A100-80G-SXMx2` and `count: 2` say the same thing, and
        saying two different counts is an error. Without a count, a config takes as many GPUs as its parallel
        sizes ask for (`plan.placement`, as `--gpu` reads on the command line)."""
        if self.gpu is None:
            return None
        choice = parse_gpu_arg(self.gpu)
        if self.count is not None and choice.counted and choice.count != self.count:
            raise ServetuneError(
                f"hardware.gpu {self.gpu!r} names {choice.count} GPUs but hardware.count is {self.count}",
                "give the count once (either xN in gpu, or count)",
            )
        if self.count is not None:
            return GpuChoice(choice.gpu, self.count, counted=True)
        return choice

    def gpu_arg(self) -> str | None:
        """`gpu` with `count` folded in, as `--gpu` spells it (what the simulator is given)."""
        if self.gpu is None or self.count is None:
            return self.gpu
        return self.gpu if parse_gpu_arg(self.gpu).counted else f"{self.gpu}x{self.count}"

    def placement(self, flags: Mapping[str, object]) -> Placement | None:
        """Where a config of this experiment runs (None on CPU)."""
        choice = self.resolved()
        return place(choice, flags) if choice else None

    def gpus_for(self, flags: Mapping[str, object]) -> int:
        """How many GPUs a config takes (0 on CPU): what GPU-minutes, the planner and the deploy files count."""
        placed = self.placement(flags)
        return placed.gpus if placed else 0

    def slot_size(self, flags: Mapping[str, object]) -> int:
        """How many devices a launch of this config occupies while it runs, for the executors that run launches
        side by side: its world size (TP x PP x DP, by `plan.placement`), not the count given (a TP1 config on
        `H200x4` holds one GPU); 1 on CPU, where each launch still takes a slot of its own."""
        placed = self.placement(flags)
        return placed.world_size if placed else 1


# A CUDA_VISIBLE_DEVICES entry: an index, or a GPU's or MIG instance's UUID. CUDA stops reading the list at the
# first entry it does not understand, so any other text would hide GPUs from a slot without a word.
_GPU_ID = re.compile(r"\d+|(?:GPU|MIG)-[0-9A-Za-z/-]+")


_RAY_ADDRESS = re.compile(
    r"(?:ray://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?):(\d{1,5})"
)


def _ray_address(address: str) -> bool:
    """Whether `address` is one `ray.init` can join: `auto`, or a host and a port (1-65535), so a typo is refused
    by `tune --check` instead of by Ray once the run has started."""
    found = _RAY_ADDRESS.fullmatch(address)
    return address == "auto" or (found is not None and 1 <= int(found.group(1)) <= 65535)


class ExecutorSpec(_Strict):
    """Where the launch groups run (`executor:`, or `tune --executor`): one after another here (`local`), side by
    side on this host's GPUs (`local-gpus`), as Ray tasks on the nodes of a Ray cluster (`ray`), or nowhere:
    answered from a measured table (`replay`, to try a strategy against real measurements). Where a trial runs is
    not part of the experiment: a folder started on one executor resumes on another."""

    kind: ExecutorKind = "local"
    gpus: tuple[str, ...] | None = Field(
        default=None,
        description="local-gpus: the GPU ids to share out (CUDA_VISIBLE_DEVICES values, NVML order); default: "
        "every GPU NVML sees.",
    )
    address: str | None = Field(
        default=None, description="ray: the cluster's address (`ray.init`); default: RAY_ADDRESS, else `auto`."
    )
    resource: str = Field(
        default="GPU",
        pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]*$",
        description="ray: the resource a launch group asks for, one unit per GPU it occupies (`GPU` = num_gpus); "
        "a custom resource of `ray start --resources` on CPU-only clusters.",
    )
    table: str | None = Field(
        default=None,
        description="replay: the folder of a measured table (grid.json, table.csv, variants.csv), e.g. "
        "benchmarks/tuning_table.",
    )
    seed: int = Field(default=0, description="replay: the seed of the draws from the table's measured repeats.")

    @model_validator(mode="before")
    @classmethod
    def _bare_kind(cls, data: Any) -> Any:
        # Shorthand: `executor: ray`.
        return {"kind": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _keys_of_its_kind(self) -> ExecutorSpec:
        if self.gpus is not None and self.kind != "local-gpus":
            raise ValueError(f"gpus is for executor local-gpus (the executor is {self.kind})")
        if self.gpus is not None and (not self.gpus or len(set(self.gpus)) != len(self.gpus) or "" in self.gpus):
            raise ValueError(f"gpus must list distinct GPU ids, e.g. [0, 1] (got {list(self.gpus)})")
        not_ids = [g for g in self.gpus or () if not _GPU_ID.fullmatch(g)]
        if not_ids:
            raise ValueError(
                f"gpus must be GPU indices (0, 1, ...) or UUIDs (GPU-..., MIG-...), as CUDA_VISIBLE_DEVICES takes them"
                f" (got {', '.join(repr(g) for g in not_ids)})"
            )
        if (self.address is not None or self.resource != "GPU") and self.kind != "ray":
            raise ValueError(f"address and resource are for executor ray (the executor is {self.kind})")
        if (self.table is not None or self.seed != 0) and self.kind != "replay":
            raise ValueError(f"table and seed are for executor replay (the executor is {self.kind})")
        if self.kind == "replay" and not self.table:
            raise ValueError(
                "executor replay needs table: the folder of a measured table (e.g. benchmarks/tuning_table)"
            )
        if self.address is not None and not _ray_address(self.address):
            raise ValueError(
                f"address must be a Ray cluster's HOST:PORT (ray://HOST:PORT for Ray Client) or auto, got "
                f"{self.address[:80]!r}"
            )
        return self

    @field_validator("gpus", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        # `gpus: [0, 1]` and `--gpus 0,1` both give CUDA_VISIBLE_DEVICES values.
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list | tuple):
            return tuple(str(v).strip() for v in value)
        return value


def gpu_slots(gpus: Sequence[str], need: int) -> int:
    """How many launches of `need` GPUs each run side by side on `gpus` (0: none ever fits): the room of executor
    local-gpus, as its run and `tune --check` both judge it."""
    return len(gpus) // max(1, need)


def describe_gpus(gpus: Sequence[str]) -> str:
    """What executor local-gpus has, in the words of its messages."""
    return f"executor local-gpus has {len(gpus)}: {','.join(gpus)}"


class SuiteSpec(_Strict):
    probes: Probes = Field(default_factory=lambda: Probes.model_validate({"short_latency": {}, "decode_speed": {}}))
    repeats: int = Field(default=3, ge=1, le=100, description="Repeats per probe (for confidence intervals).")
    warmup_requests: int = Field(default=2, ge=0, description="Requests sent after ready, never measured.")


class Objective(_Strict):
    """What to maximise (or minimise): one figure of one probe."""

    probe: str
    figure: str
    goal: Literal["max", "min"] | None = Field(
        default=None, description="Default: the figure's own direction (higher or lower is better)."
    )

    @property
    def direction(self) -> Literal["max", "min"]:
        """The goal given, else the one the probe declares for its figure (max when it declares none)."""
        if self.goal is not None:
            return self.goal
        spec = figure_spec(self.probe, self.figure)
        return "min" if spec is not None and spec.better == "lower" else "max"

    @property
    def label(self) -> str:
        return f"{self.probe}.{self.figure}"


def objective_named(name: str) -> Objective | None:
    """An `objective: NAME` shorthand as (probe, figure), from the probes' own declarations."""
    found = named_objectives().get(name)
    return Objective(probe=found[0], figure=found[1]) if found else None


class Change(_Strict):
    """One variant's difference from the base: flags (None removes a flag), env, client overrides, or even
    another engine and model (to compare llama.cpp with vLLM on one suite)."""

    engine: EngineName | None = None
    model: str | None = None
    flags: dict[str, FlagValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict, description="ClientSpec fields to override.")
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_flags(cls, data: Any) -> Any:
        # Shorthand: `A1: {kv-cache-dtype: auto}` is a change of flags only.
        if isinstance(data, dict) and not set(data) <= {"flags", "env", "client", "note", "engine", "model"}:
            return {"flags": data}
        return data


class Matrix(_Strict):
    """A baseline plus one change at a time (seed 001's round 2)."""

    baseline: str = "baseline"
    changes: dict[str, Change] = Field(min_length=1)


class Grid(_Strict):
    """The Cartesian product of flag values."""

    flags: dict[str, list[FlagValue]] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, data: Any) -> Any:
        if isinstance(data, dict) and "flags" not in data:
            return {"flags": data}
        return data


class Dim(_Strict):
    """One search dimension: `int: [lo, hi]`, `float: [lo, hi]` (optionally `log: true`) or `choice: [...]`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    int_range: tuple[int, int] | None = Field(default=None, alias="int")
    float_range: tuple[float, float] | None = Field(default=None, alias="float")
    log: bool = False
    choice: list[FlagValue] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Dim:
        kinds = [k for k in ("int_range", "float_range", "choice") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of int: [lo, hi], float: [lo, hi] or choice: [...]")
        bounds = self.int_range or self.float_range
        if bounds is not None and bounds[0] >= bounds[1]:
            raise ValueError(f"the range [{bounds[0]}, {bounds[1]}] is empty: the low bound must be below the high")
        return self


class Search(_Strict):
    """Bayesian search (Optuna TPE, ask/tell) over flags, after the planner removes configs that do not fit."""

    space: dict[str, Dim] = Field(min_length=1)
    budget_gpu_minutes: float = Field(gt=0, description="Stop asking once launches have used this much GPU time.")
    max_trials: int = Field(default=50, ge=1)
    seed: int = 0
    sampler: Literal["tpe", "random"] = Field(
        default="tpe",
        description="tpe: Bayesian (Optuna's TPE, learning from each result); random: points drawn uniformly "
        "(the baseline a Bayesian search must beat).",
    )


class Stage(_Strict):
    """A round: its winner becomes the base of the next round."""

    name: str
    matrix: Matrix | None = None
    grid: Grid | None = None
    search: Search | None = None

    @model_validator(mode="after")
    def _one_generator(self) -> Stage:
        given = [k for k in ("matrix", "grid", "search") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"stage {self.name!r} needs exactly one of matrix, grid or search (got {given or 'none'})")
        return self


class Variants(_Strict):
    matrix: Matrix | None = None
    grid: Grid | None = None
    stages: list[Stage] | None = None
    search: Search | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Variants:
        given = [k for k in ("matrix", "grid", "stages", "search") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"variants needs exactly one of matrix, grid, stages or search (got {given or 'none'})")
        return self

    def as_stages(self) -> list[Stage]:
        """Every kind as a list of stages (a plain matrix is a single stage)."""
        if self.stages is not None:
            return self.stages
        return [Stage(name="main", matrix=self.matrix, grid=self.grid, search=self.search)]


class Deploy(_Strict):
    """How the recommendation is printed as a `docker run` command."""

    image: str | None = Field(default=None, description="Default: vLLM's image pinned to the engine's version.")
    port: int = Field(default=8000, ge=1, le=65535)
    host_model_dir: str | None = Field(default=None, description="Host folder mounted read-only at the model path.")
    container_name: str = "vllm"


class EstimateSpec(_Strict):
    """Judge variants with the simulator (`servetune estimate`) before launching any: `order` launches the
    predicted best first, `prune` launches only the `keep` best (plus the stage's baseline) and records the
    rest as judged by estimate only.  Applies to matrix and grid stages of vllm/sim variants on a known GPU."""

    mode: Literal["off", "order", "prune"] = "off"
    keep: int | None = Field(default=None, ge=1, description="prune: variants to launch besides the baseline.")
    calibration: str | None = Field(
        default=None, description="Profile JSON from `servetune calibrate` (default: the planner's coefficients)."
    )

    @model_validator(mode="after")
    def _keep_for_prune(self) -> EstimateSpec:
        if self.mode == "prune" and self.keep is None:
            raise ValueError("mode prune needs keep: N (how many variants to launch besides the baseline)")
        if self.mode != "prune" and self.keep is not None:
            raise ValueError(f"keep only applies to mode prune (mode is {self.mode})")
        return self


class ConfirmSpec(_Strict):
    """Re-measure the finalists with fresh repeats before recommending (a confirmatory run): the best of many
    noisy measurements is the one whose noise flattered it most (the winner's curse), so the figure the search saw
    is inflated; the recommendation uses the confirmed figures and the reports say by how much the search's were
    inflated."""

    mode: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="auto: when the run left variants unmeasured (a search stage, or variants the estimate pruned); "
        "on: always; off: never.",
    )
    finalists: int = Field(default=2, ge=1, le=20, description="The winner and the next best by the objective.")
    repeats: int | None = Field(default=None, ge=1, le=100, description="Fresh repeats (default: suite.repeats).")

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        # YAML reads a bare `on` / `off` as true / false.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    def wanted(self, searched: bool, pruned: bool) -> bool:
        """Whether the run confirms its finalists (`searched`: it has a search stage; `pruned`: the estimate left
        variants unlaunched)."""
        return self.mode == "on" or (self.mode == "auto" and (searched or pruned))


class RankingSpec(_Strict):
    """How variants are told apart (the same rule marks deltas in every report)."""

    min_effect_pct: float = Field(
        default=2.0,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="A change smaller than this (in % of the baseline) is a tie, even when its interval is narrow.",
    )


SloValue = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Experiment(_Strict):
    """A whole tuning experiment (see docs/experiment.md)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str | None = None
    engine: EngineSpec
    hardware: HardwareSpec = Field(default_factory=HardwareSpec)
    client: ClientSpec = Field(default_factory=ClientSpec)
    suite: SuiteSpec = Field(default_factory=SuiteSpec)
    slos: dict[str, SloValue] = Field(
        default_factory=dict,
        description="ttft|tpot|itl|e2el _p50|p90|p95|p99 _ms (upper bounds), error_rate (upper bound, 0..1), "
        "memory_headroom_pct (lower bound, 0..100).",
    )
    objective: Objective | str = "decode_tok_s"
    variants: Variants
    sampling_presets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    deploy: Deploy = Field(default_factory=Deploy)
    estimate: EstimateSpec = Field(default_factory=EstimateSpec)
    ranking: RankingSpec = Field(default_factory=RankingSpec)
    confirm: ConfirmSpec = Field(default_factory=ConfirmSpec)
    allow_unknown_flags: bool = Field(
        default=False,
        description="Pass flags servetune's tables do not list untouched (known flags are still checked).",
    )
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)

    def resolved_objective(self) -> Objective:
        """The objective as (probe, figure, goal); a name is one a probe declares (checked by the loader)."""
        if isinstance(self.objective, Objective):
            return self.objective
        found = objective_named(self.objective)
        if found is None:
            raise KeyError(self.objective)
        return found
