"""mock room: `servetune mock-server`, a fast OpenAI-compatible streaming server with fixed TTFT/ITL that misbehaves
on request.

Entry points: `server.running(config.MockConfig(...))` inside a test's event loop (`server.MockServer`,
`config.Fault`), `server.serve_forever`; the command is `args.MockServerArgs` run by `server.run_mock_server`.
"""
