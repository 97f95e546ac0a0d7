"""load room: the streaming load generator for OpenAI-compatible servers and the simulator.

Entry points: `run_load(base_url, model, Workload, LoadShape, ...) -> LoadResult` (`run_load_sync`), `run_sweep`
until `SATURATION`, the `Backend` protocol (`LiveBackend`, `ClientSpec`), and a command line's load as `LoadOptions`
/ `BenchArgs` (`parse_bench_argv`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.load.backend import Backend as Backend, ClientSpec as ClientSpec, LiveBackend as LiveBackend
    from servetune.load.bench_args import (
        BenchArgs as BenchArgs,
        help_text as help_text,
        parse_bench_argv as parse_bench_argv,
    )
    from servetune.load.options import LoadOptions as LoadOptions
    from servetune.load.prompts import (
        endpoint_fields as endpoint_fields,
        load_items as load_items,
        plan_conversation as plan_conversation,
    )
    from servetune.load.runner import (
        LoadResult as LoadResult,
        run_load as run_load,
        run_load_sync as run_load_sync,
        run_sync as run_sync,
    )
    from servetune.load.saturation import SATURATION as SATURATION, Saturation as Saturation
    from servetune.load.shape import LoadShape as LoadShape, Phaser as Phaser, Timeouts as Timeouts
    from servetune.load.sweep import SweepPoint as SweepPoint, SweepResult as SweepResult, run_sweep as run_sweep
    from servetune.load.tokens import (
        LocalTokenizer as LocalTokenizer,
        ServerTokenizer as ServerTokenizer,
        TokenCounter as TokenCounter,
        WordCounter as WordCounter,
        make_counter as make_counter,
    )
    from servetune.load.workload import (
        Dist as Dist,
        FileSource as FileSource,
        PromptSource as PromptSource,
        RequestClass as RequestClass,
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
            "Phaser": "shape",
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
            "endpoint_fields": "prompts",
            "help_text": "bench_args",
            "load_items": "prompts",
            "make_counter": "tokens",
            "parse_bench_argv": "bench_args",
            "plan_conversation": "prompts",
            "run_load": "runner",
            "run_load_sync": "runner",
            "run_sweep": "sweep",
            "run_sync": "runner",
        },
    )
