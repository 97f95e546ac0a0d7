"""tune room: experiments over engine flags, planned, run, stored, ranked and recommended.

Entry points: `loader.load_experiment(path) -> Experiment`, `plan.plan_experiment` (what `--check` prints is what
runs), `loop.run_experiment(exp, out_dir) -> Outcome` over `session.LaunchSession`s on an `executor.Executor`
(`virtual.virtual_launcher(exp)`: the simulator in process), the `store.Store`; ranking and the recommendation are
`rank.rank` and `recommend.recommend`.
"""
