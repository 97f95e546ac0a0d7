"""engines room: launching vLLM, llama.cpp, SGLang and servetune's simulator, and the one vocabulary of their flags.

Entry points: `config.EngineConfig`; `launch.launch(cfg, log_dir=...) -> RunningEngine` and `launch.attach`;
`failures.EngineLaunchError`; `vocab.parse_argv` / `to_argv` / `normalize_flags`; `commands.serve_command` /
`docker_command` -> `Command`; `models.resolve_model`; `registry.adapter_for(engine)`; `flagtable.table_for`;
`servetune launch` / `tiny-model` (`args.LaunchArgs`, `args.TinyModelArgs`; `foreground.run_launch`).
"""
