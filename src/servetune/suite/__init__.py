"""suite room: the probes a server is measured with, each defined once in the registry.

Entry points: `registry.get_probe(name) -> ProbeSpec` / `registry.all_probes()`, `run.run_probe(spec,
ProbeContext(backend), params) -> ProbeResult`, `params.Probes` (which a suite runs), and `check.check_server`
(`servetune check`: `check_args.CheckArgs` run by `check.run_check`).
"""
