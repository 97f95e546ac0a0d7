"""control room: the one control-plane HTTP client of a server (health, models, tokenize, metrics text, version).

Entry points: `client.ControlClient(base_url, api_key=..., timeouts=ControlTimeouts(...))`, which answers `Models`
and raises `ControlError` (`ControlTimeoutError` when the server is too slow; synchronous code runs its calls with
`servetune.process.interrupts.run_coroutine`); `liveness.generate_one_token(base_url, model, deadline_s) ->
ProbeOutcome` is the liveness check of a running engine.
"""
