"""metrics room: what a run's requests measure, from the `RequestRecord` of each (formulas: docs/metrics.md).

Entry points: `summarize(records) -> Summary`, SLOs (`Slos`, `slo_problem`), validity (`check_validity`,
`run_problems`), engine `/metrics` (`scrape` -> `MetricsSnapshot`, `delta`), bench runs (`write_run`, `read_run`,
`read_runs`) and vLLM's result JSON (`vllm_result`, `records_from_vllm`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.metrics.export import (
        summary_row as summary_row,
        write_jsonl as write_jsonl,
        write_requests_csv as write_requests_csv,
        write_rows_csv as write_rows_csv,
        write_summary_csv as write_summary_csv,
    )
    from servetune.metrics.imports import (
        AIPERF_RECORDS as AIPERF_RECORDS,
        AIPERF_SUMMARY as AIPERF_SUMMARY,
        find_runs as find_runs,
        read_runs as read_runs,
    )
    from servetune.metrics.journal import RecordJournal as RecordJournal
    from servetune.metrics.prometheus import (
        MetricsDelta as MetricsDelta,
        MetricsSnapshot as MetricsSnapshot,
        delta as delta,
        scrape as scrape,
    )
    from servetune.metrics.record import (
        ErrorClass as ErrorClass,
        Phase as Phase,
        RequestRecord as RequestRecord,
        TokenSource as TokenSource,
    )
    from servetune.metrics.render import summary_lines as summary_lines, sweep_lines as sweep_lines
    from servetune.metrics.runs import (
        RUN_SUFFIX as RUN_SUFFIX,
        TOOL_NAMES as TOOL_NAMES,
        BenchRun as BenchRun,
        RunSource as RunSource,
        read_records as read_records,
        read_run as read_run,
        write_run as write_run,
    )
    from servetune.metrics.slo import (
        BOUNDS as BOUNDS,
        LATENCY_SLO_KEY as LATENCY_SLO_KEY,
        Slos as Slos,
        is_latency_slo as is_latency_slo,
        request_slos as request_slos,
        slo_problem as slo_problem,
        wall_clock_slos as wall_clock_slos,
    )
    from servetune.metrics.summary import Stat as Stat, Summary as Summary, summarize as summarize
    from servetune.metrics.timeline import Timeline as Timeline
    from servetune.metrics.validity import (
        ClientProcess as ClientProcess,
        ClientReport as ClientReport,
        Validity as Validity,
        check_validity as check_validity,
        run_problems as run_problems,
    )
    from servetune.metrics.vllm_format import (
        PERCENTILE_METRICS as PERCENTILE_METRICS,
        figures_of as figures_of,
        records_from_vllm as records_from_vllm,
        result_filename as result_filename,
        vllm_result as vllm_result,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "AIPERF_RECORDS": "imports",
            "AIPERF_SUMMARY": "imports",
            "BOUNDS": "slo",
            "BenchRun": "runs",
            "ClientProcess": "validity",
            "ClientReport": "validity",
            "ErrorClass": "record",
            "LATENCY_SLO_KEY": "slo",
            "MetricsDelta": "prometheus",
            "MetricsSnapshot": "prometheus",
            "PERCENTILE_METRICS": "vllm_format",
            "Phase": "record",
            "RUN_SUFFIX": "runs",
            "RecordJournal": "journal",
            "RequestRecord": "record",
            "RunSource": "runs",
            "Slos": "slo",
            "Stat": "summary",
            "Summary": "summary",
            "TOOL_NAMES": "runs",
            "Timeline": "timeline",
            "TokenSource": "record",
            "Validity": "validity",
            "check_validity": "validity",
            "delta": "prometheus",
            "figures_of": "vllm_format",
            "find_runs": "imports",
            "is_latency_slo": "slo",
            "read_records": "runs",
            "read_run": "runs",
            "read_runs": "imports",
            "records_from_vllm": "vllm_format",
            "request_slos": "slo",
            "result_filename": "vllm_format",
            "run_problems": "validity",
            "scrape": "prometheus",
            "slo_problem": "slo",
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
