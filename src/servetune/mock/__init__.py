"""mock room: `servetune mock-server`, a fast OpenAI-compatible streaming server with fixed TTFT/ITL that
misbehaves on request (`config.Fault`); `server.running(MockConfig())` runs it inside a test's event loop."""
