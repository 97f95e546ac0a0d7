"""metrics room: vLLM-named summaries (`summarize` -> `Summary` of `Stat`s), SLOs and goodput (`Slos`), validity
(`Validity`, `check_validity`), exports (servetune's files: `write_jsonl`, `write_requests_csv`, ...; vLLM's result
JSON: `vllm_result`, `records_from_vllm`), engine `/metrics` snapshots and deltas (`scrape` -> `MetricsSnapshot`,
`delta` -> `MetricsDelta`), bench folders of measured runs (`BenchRun`, `read_run`, `write_run`) and other tools'
result files read into them (`read_runs`, `find_runs`); the request record every figure is computed from
(`RequestRecord`, `ErrorClass`). Formulas: docs/metrics.md."""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.metrics.export import (
        summary_row as summary_row,
    )
    from servetune.metrics.export import (
        write_jsonl as write_jsonl,
    )
    from servetune.metrics.export import (
        write_requests_csv as write_requests_csv,
    )
    from servetune.metrics.export import (
        write_rows_csv as write_rows_csv,
    )
    from servetune.metrics.export import (
        write_summary_csv as write_summary_csv,
    )
    from servetune.metrics.imports import find_runs as find_runs
    from servetune.metrics.imports import read_runs as read_runs
    from servetune.metrics.journal import RecordJournal as RecordJournal
    from servetune.metrics.prometheus import (
        MetricsDelta as MetricsDelta,
    )
    from servetune.metrics.prometheus import (
        MetricsSnapshot as MetricsSnapshot,
    )
    from servetune.metrics.prometheus import (
        delta as delta,
    )
    from servetune.metrics.prometheus import (
        scrape as scrape,
    )
    from servetune.metrics.record import (
        ErrorClass as ErrorClass,
    )
    from servetune.metrics.record import (
        Phase as Phase,
    )
    from servetune.metrics.record import (
        RequestRecord as RequestRecord,
    )
    from servetune.metrics.record import (
        TokenSource as TokenSource,
    )
    from servetune.metrics.render import summary_lines as summary_lines
    from servetune.metrics.render import sweep_lines as sweep_lines
    from servetune.metrics.runs import (
        BenchRun as BenchRun,
    )
    from servetune.metrics.runs import (
        RunSource as RunSource,
    )
    from servetune.metrics.runs import (
        read_records as read_records,
    )
    from servetune.metrics.runs import (
        read_run as read_run,
    )
    from servetune.metrics.runs import (
        write_run as write_run,
    )
    from servetune.metrics.slo import Slos as Slos
    from servetune.metrics.slo import request_slos as request_slos
    from servetune.metrics.slo import wall_clock_slos as wall_clock_slos
    from servetune.metrics.summary import Stat as Stat
    from servetune.metrics.summary import Summary as Summary
    from servetune.metrics.summary import summarize as summarize
    from servetune.metrics.timeline import Timeline as Timeline
    from servetune.metrics.validity import (
        ClientProcess as ClientProcess,
    )
    from servetune.metrics.validity import (
        ClientReport as ClientReport,
    )
    from servetune.metrics.validity import (
        Validity as Validity,
    )
    from servetune.metrics.validity import (
        check_validity as check_validity,
    )
    from servetune.metrics.validity import (
        run_problems as run_problems,
    )
    from servetune.metrics.vllm_format import (
        figures_of as figures_of,
    )
    from servetune.metrics.vllm_format import (
        records_from_vllm as records_from_vllm,
    )
    from servetune.metrics.vllm_format import (
        result_filename as result_filename,
    )
    from servetune.metrics.vllm_format import (
        vllm_result as vllm_result,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "BenchRun": "runs",
            "ClientProcess": "validity",
            "ClientReport": "validity",
            "ErrorClass": "record",
            "MetricsDelta": "prometheus",
            "MetricsSnapshot": "prometheus",
            "Phase": "record",
            "RecordJournal": "journal",
            "RequestRecord": "record",
            "RunSource": "runs",
            "Slos": "slo",
            "Stat": "summary",
            "Summary": "summary",
            "Timeline": "timeline",
            "TokenSource": "record",
            "Validity": "validity",
            "check_validity": "validity",
            "delta": "prometheus",
            "figures_of": "vllm_format",
            "find_runs": "imports",
            "read_records": "runs",
            "read_run": "runs",
            "read_runs": "imports",
            "records_from_vllm": "vllm_format",
            "request_slos": "slo",
            "result_filename": "vllm_format",
            "run_problems": "validity",
            "scrape": "prometheus",
            "summarize": "summary",
            "summary_lines": "render",
            "summary_row": "export",
            "sweep_lines": "render",
            "vllm_result": "vllm_format",
            "wall_clock_slos": "slo",
            "write_jsonl": "export",
            "write_requests_csv": "export",
            "write_rows_csv": "export",
            "write_run": "runs",
            "write_summary_csv": "export",
        },
    )
