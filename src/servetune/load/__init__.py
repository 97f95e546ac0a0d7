"""load room: the streaming load generator.

`runner.run_load(base_url, model, Workload, LoadShape, ...) -> LoadResult` (and `run_load_sync`) drive an
OpenAI-compatible server; `sweep.run_sweep` repeats it over levels until saturation. Requests are described by
`workload.Workload`, their arrival by `shape.LoadShape`, and each one's timeline is a `record.RequestRecord`.
Nothing is imported here, so `import servetune.load` stays free.
"""
