"""sim room: a simulated vLLM (scheduler, step time, KV cache), calibrated against measured runs.

Entry points: `backend.SimBackend(deployment)` in process, `virtual.VirtualServer` on a virtual clock, `server.serve`
over HTTP (`flags.parse_sim_args`), `deployment.deployment_for_config(cfg, ...)` / `deployment.build_deployment`,
and calibration (`fitting.calibrate_dirs`, `calibration.fit_coefficients` -> `profile.CalibrationProfile`). The
commands' arguments are `args` (`EstimateArgs`, `SimServeCommand`, `CalibrateArgs`), their runs
`estimate.run_estimate`, `server.run_sim_serve`, `fitting.run_calibrate`.
"""
