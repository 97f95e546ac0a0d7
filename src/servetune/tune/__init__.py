"""tune room: experiments over engine flags, planned, run, stored, ranked and recommended, in four parts that
import downward: `schema` (what the file says) → `search` (what to measure next) → `execution` (measuring it) →
`results` (what it means); `loop.run_experiment(exp, out_dir) -> Outcome`, the conductor, stands above them.

Entry points: `schema.loader.load_experiment(path) -> Experiment`, `search.plan.plan_experiment` (what `--check`
prints is what runs), `loop.run_experiment` over `execution.session.LaunchSession`s on an
`execution.executor.Executor` (`execution.virtual.virtual_launcher(exp)`: the simulator in process), the
`results.store.Store`; ranking and the recommendation are `results.rank.rank` and `results.recommend.recommend`.
"""
