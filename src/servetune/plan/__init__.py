"""plan room: vLLM's memory ledger, feasibility, fixes and roofline speed for a model on a GPU.

Entry points: `api.plan_for(...) -> Plan`, `target.resolve_target(...) -> Target` (what a command asks for),
`placement.place(...) -> Placement` (how many GPUs it runs on), `calibrate.compare_with_log` (against a real
startup log); tables are `render.render`; `servetune plan` is `args.PlanArgs` run by `command.run_plan`.
"""
