"""load room: the streaming load generator.

`run_load(base_url, model, Workload, LoadShape, ...) -> LoadResult` (and `run_load_sync`, through `run_sync`) drive
an OpenAI-compatible server, or the simulator behind the same `Backend` protocol (`LiveBackend`, `ClientSpec`);
`run_sweep` repeats it over levels until `SATURATION` says more load stops buying throughput. Requests are described
by `Workload` (`RequestClass`es with `Dist`ributions), their arrival by `LoadShape` (with its `Timeouts`), a command
line's load by `LoadOptions` / `BenchArgs`, and each one's timeline is a `servetune.metrics.RequestRecord`. Nothing
is imported here (the names are imported on first use), so `import servetune.load` stays free.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.load.backend import Backend as Backend
    from servetune.load.backend import ClientSpec as ClientSpec
    from servetune.load.backend import LiveBackend as LiveBackend
    from servetune.load.bench_args import BenchArgs as BenchArgs
    from servetune.load.bench_args import parse_bench_argv as parse_bench_argv
    from servetune.load.options import LoadOptions as LoadOptions
    from servetune.load.runner import (
        LoadResult as LoadResult,
    )
    from servetune.load.runner import (
        run_load as run_load,
    )
    from servetune.load.runner import (
        run_load_sync as run_load_sync,
    )
    from servetune.load.runner import (
        run_sync as run_sync,
    )
    from servetune.load.saturation import SATURATION as SATURATION
    from servetune.load.saturation import Saturation as Saturation
    from servetune.load.shape import LoadShape as LoadShape
    from servetune.load.shape import Timeouts as Timeouts
    from servetune.load.sweep import SweepPoint as SweepPoint
    from servetune.load.sweep import SweepResult as SweepResult
    from servetune.load.sweep import run_sweep as run_sweep
    from servetune.load.tokens import (
        LocalTokenizer as LocalTokenizer,
    )
    from servetune.load.tokens import (
        ServerTokenizer as ServerTokenizer,
    )
    from servetune.load.tokens import (
        TokenCounter as TokenCounter,
    )
    from servetune.load.tokens import (
        WordCounter as WordCounter,
    )
    from servetune.load.tokens import (
        make_counter as make_counter,
    )
    from servetune.load.workload import (
        Dist as Dist,
    )
    from servetune.load.workload import (
        FileSource as FileSource,
    )
    from servetune.load.workload import (
        PromptSource as PromptSource,
    )
    from servetune.load.workload import (
        RequestClass as RequestClass,
    )
    from servetune.load.workload import (
        Workload as Workload,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Backend": "backend",
            "BenchArgs": "bench_args",
            "ClientSpec": "backend",
            "Dist": "workload",
            "FileSource": "workload",
            "LiveBackend": "backend",
            "LoadOptions": "options",
            "LoadResult": "runner",
            "LoadShape": "shape",
            "LocalTokenizer": "tokens",
            "PromptSource": "workload",
            "RequestClass": "workload",
            "SATURATION": "saturation",
            "Saturation": "saturation",
            "ServerTokenizer": "tokens",
            "SweepPoint": "sweep",
            "SweepResult": "sweep",
            "Timeouts": "shape",
            "TokenCounter": "tokens",
            "WordCounter": "tokens",
            "Workload": "workload",
            "make_counter": "tokens",
            "parse_bench_argv": "bench_args",
            "run_load": "runner",
            "run_load_sync": "runner",
            "run_sweep": "sweep",
            "run_sync": "runner",
        },
    )
