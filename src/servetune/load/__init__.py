"""load room: the streaming load generator for OpenAI-compatible servers and the simulator.

Entry points: `runner.run_load(base_url, model, Workload, LoadShape, ...) -> LoadResult` (`runner.run_load_sync`),
`sweep.run_sweep` until `saturation.SATURATION`, the `backend.Backend` protocol (`LiveBackend`, `ClientSpec`), and a
command line's load as `options.LoadOptions` / `bench_args.BenchArgs` (`bench_args.parse_bench_argv`).
"""
