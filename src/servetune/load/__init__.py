"""load room: the streaming load generator for OpenAI-compatible servers and the simulator.

Entry points: `runner.run_load(base_url, model, Workload, LoadShape, ...) -> LoadResult` (`runner.run_load_sync`),
`sweep.run_sweep` until `saturation.SATURATION`, the `backend.Backend` protocol (`LiveBackend`, `ClientSpec`), a
command line's load as `options.LoadOptions`, and `servetune bench`: its arguments `bench_args.BenchArgs`, its run
`bench.run_bench`.
"""
