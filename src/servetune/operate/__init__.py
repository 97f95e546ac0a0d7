"""operate room: `servetune serve` and `servetune deploy`: an engine run under supervision behind nginx, and the
deployment files sized from the same measurements.

Entry points: `supervisor.Supervisor(ServeOptions(...))`, `deploy.write_deployment(DeployInputs(...))` and
`deploy.deploy(deploy_args.DeployArgs(...))` (`servetune deploy`),
`source.load_source` (`Source`), `sizing.serve_sizing`, `fallback.plan_fallback`, `switch.blue_green` and
`control.request_switch`, `events.EventLog` / `events.read_events`.
"""
