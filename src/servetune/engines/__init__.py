"""Engines room: launch, readiness, startup facts, failure classes and teardown for vLLM, llama.cpp, SGLang
and servetune's simulator.

Public API: `config.EngineConfig`; `launch.launch(cfg, log_dir=...) -> RunningEngine` and `launch.attach`;
`failures.EngineLaunchError` (`.failure: FailureInfo`); `vllm.parse_vllm_log`; `check.run_check`.
"""
