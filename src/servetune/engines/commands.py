"""The one builder of engine command lines a user runs: `vllm serve …`, `docker run … vllm/vllm-openai:vX.Y.Z …`,
`llama-server …`, `python -m sglang.launch_server …`, and the program and arguments a deployment file's container
runs, for `plan`, `tune` and `deploy` alike.

Each engine's adapter says which program starts it (pasted, or inside its image), how the model and the served
name are given, and which image is pinned for a release; this module assembles the words from that. A written
command is servetune's answer, so it must work as written and must not leak: the image tag is the engine release
servetune measured; a host model folder is bind-mounted read-only (never a named volume); a bundled planner
config name (`qwen3.6-27b`, not a Hugging Face id) is replaced by the user's path or a marked placeholder;
settings that only make sense inside servetune (`--load-format dummy`, the simulator's own flags) are dropped
with a note; the value of every secret flag (`servetune.secrets.is_secret_flag`: `--api-key`, each of vLLM's
list of keys, `--ssl-keyfile-password`, …) and of every secret-looking environment variable is an `EnvRef`, a
reference to an environment variable, which each writer spells its own way (`"$VAR"` in a shell, `${VAR}` in
compose, `$(VAR)` in Kubernetes). Flags are written by `servetune.engines.vocab.to_argv`, the writer every
launch uses.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from servetune.engines.config import EngineConfig, secret_env
from servetune.engines.flagtable import table_for
from servetune.engines.registry import adapter_for
from servetune.engines.vocab import canonical_argv, parse_argv, to_argv
from servetune.errors import ServetuneError
from servetune.model.bundled import BUNDLED_DIR, bundled_model
from servetune.secrets import is_secret_flag, is_secret_name, secret_texts

DEV_ONLY: dict[str, tuple[object, str]] = {
    "load-format": ("dummy", "it serves random weights, a servetune test setting; production loads the checkpoint"),
}
"""Flag values that only make sense in a servetune test run: (value, why), dropped from production commands."""

CONTAINER_PORT = 8000
"""The port an engine listens on inside its container (vLLM's image exposes 8000)."""


@dataclass(frozen=True)
class Command:
    """A command to paste: `argv` (a secret appears as its `$VAR` reference), `text` (shell text, one option per
    line joined by ` \\` + newline) and `notes` (what the user must know or do before running it)."""

    argv: tuple[str, ...]
    text: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class EnvRef:
    """A secret written as a reference to the environment variable `name` that holds it, after `prefix` (one word:
    `-e HF_TOKEN="$HF_TOKEN"` has prefix `HF_TOKEN=`, `--api-key=…` has prefix `--api-key=`)."""

    name: str
    prefix: str = ""


Word = str | EnvRef
"""A command-line word: literal text, or a reference to a secret in the environment."""


@dataclass(frozen=True)
class Launch:
    """An engine launch as a container runs it: `program` (the image's entrypoint), then `args`; `env` the
    variables it is given (secret ones as references), `secrets` the variables every reference names, `notes`
    what its user must know."""

    program: tuple[str, ...]
    args: tuple[Word, ...]
    env: tuple[tuple[str, Word], ...]
    secrets: tuple[str, ...]
    notes: tuple[str, ...]


def serve_command(
    cfg: EngineConfig, *, production: bool = True, model_path: str | None = None, secrets: tuple[str, ...] = ()
) -> Command:
    """The engine's own launch command for `cfg`: `vllm serve MODEL …` (a `sim` config becomes the vLLM command
    it simulates), `llama-server -m MODEL --alias NAME …`, `python -m sglang.launch_server --model-path …`.

    `production` drops servetune's test settings with a note each; `model_path` replaces a bundled config name
    (without it, a `/path/to/NAME` placeholder and a note); `secrets` names more environment variables or flags
    whose values must not be written."""
    plan = _plan(cfg, production=production, model_path=model_path, secrets=secrets)
    adapter = adapter_for(plan.engine)
    program: list[Word] = list(adapter.shell_program)
    model: list[Word] = list(adapter.model_args(plan.model, adapter.shell_program))
    head: list[list[Word]] = [[*program, *model]] if len(model) == 1 else [program, model]
    named: list[Word] = [adapter.name_flag, plan.served] if plan.served else []
    lines: list[list[Word]] = [*head, *([named] if named else []), *_option_lines(plan.flags)]
    return _command(lines, env=plan.env, notes=plan.notes)


def container_launch(cfg: EngineConfig, *, model: str, port: int = CONTAINER_PORT) -> Launch:
    """What a deployment file's container runs for `cfg`: the entrypoint of the engine's image, the model at its
    in-container path `model`, the served name, `--host 0.0.0.0 --port PORT` and the flags (production ones:
    servetune's test settings dropped), every secret as an `EnvRef`."""
    adapter = adapter_for(cfg.engine)
    if not adapter.image_program:
        adapter.image(cfg.version, 0)  # refuses, naming the way out
    plan = _plan(cfg, production=True, model_path=model, secrets=())
    program = list(adapter.image_program)
    args: list[Word] = [
        *adapter.model_args(plan.model, program),
        adapter.name_flag,
        plan.served or cfg.name,
        *("--host", "0.0.0.0", "--port", str(port)),
        *plan.flags,
    ]
    refs = [w.name for w in (*args, *(v for _, v in plan.env)) if isinstance(w, EnvRef)]
    return Launch(tuple(program), tuple(args), tuple(plan.env), tuple(dict.fromkeys(refs)), plan.notes)


def docker_command(
    cfg: EngineConfig,
    *,
    image: str | None = None,
    port: int = 8000,
    host_model_dir: str | None = None,
    container_name: str = "vllm",
    gpus: int | str = "all",
    production: bool = True,
    model_path: str | None = None,
    secrets: tuple[str, ...] = (),
) -> Command:
    """`docker run … vllm/vllm-openai:vX.Y.Z MODEL …` for a vLLM (or simulated vLLM) config.

    The tag is the adapter's pin of `cfg.version` (the newest release servetune knows, with a note, when the
    version is unknown). The model folder (`host_model_dir`, else `model_path` or `cfg.model` when it is a local
    path) is bind-mounted read-only at `/models/NAME` and passed as that in-container path; a Hugging Face id is
    passed as is, with the host's Hugging Face cache mounted. `--ipc=host` (PyTorch's shared memory), the NVIDIA
    runtime with `gpus`, and `-p PORT:8000`. `production` runs it detached with a restart policy (else `--rm` in
    the foreground)."""
    if cfg.engine not in ("vllm", "sim"):
        raise ServetuneError(
            f"docker_command writes vLLM's official image; {cfg.engine} has none here",
            "use serve_command for llama.cpp and SGLang",
        )
    if not 1 <= port <= 65535:
        raise ServetuneError(f"port {port} is not a TCP port", "give a port between 1 and 65535, e.g. 8000")
    plan = _plan(cfg, production=production, model_path=model_path or host_model_dir, secrets=secrets)
    notes = list(plan.notes)
    if image is None:
        pinned = adapter_for("vllm").image(plan.version, 1)
        image = pinned.ref
        if pinned.guessed:
            notes.append(f"the image is {image}: {pinned.source}")
    source = host_model_dir or (plan.model if _local_path(plan.model) else None)
    if source:
        name = PurePosixPath(source.rstrip("/")).name or "model"
        inside = f"/models/{name}"
        mount: list[Word] = ["-v", f"{source}:{inside}:ro"]
    else:
        inside = plan.model  # a Hugging Face id: vLLM downloads it into the mounted cache
        mount = ["-v", "~/.cache/huggingface:/root/.cache/huggingface"]
    served = plan.served or (cfg.name if inside != cfg.name else None)
    restart: list[list[Word]] = [["--restart", "unless-stopped"]] if production else []
    named: list[list[Word]] = [["--served-model-name", served]] if served else []
    run: list[list[Word]] = [
        ["docker", "run", "-d" if production else "--rm"],
        ["--name", container_name],
        *restart,
        ["--runtime", "nvidia", "--gpus", str(gpus)],
        ["--ipc=host"],
        ["-p", f"{port}:{CONTAINER_PORT}"],
        mount,
        *[["-e", EnvRef(v.name, f"{k}=") if isinstance(v, EnvRef) else f"{k}={v}"] for k, v in plan.env],
        [image],
        [inside],
        *named,
        *_option_lines(plan.flags),
    ]
    return _command(run, env=[], notes=tuple(notes))


def launch_commands(
    cfg: EngineConfig,
    *,
    gpus: int,
    image: str | None = None,
    port: int = 8000,
    host_model_dir: str | None = None,
    container_name: str = "vllm",
) -> tuple[Command, Command | None]:
    """The commands `plan` and `tune` print for a config on `gpus` GPUs: its serve command and, for vLLM, its
    `docker run` (given that many GPUs; all of them on CPU, where the count is 0). One call for both, so the same
    config prints the same lines wherever it is recommended."""
    serve = serve_command(cfg)
    if cfg.engine not in ("vllm", "sim"):
        return serve, None
    docker = docker_command(
        cfg,
        image=image,
        port=port,
        host_model_dir=host_model_dir,
        container_name=container_name,
        gpus=gpus or "all",
    )
    return serve, docker


@dataclass(frozen=True)
class _Plan:
    """What a command says, engine-neutral: model, served name, flags (with secrets as references), env, notes."""

    engine: str
    version: str | None
    model: str
    served: str | None
    flags: list[Word]
    env: list[tuple[str, Word]]
    notes: tuple[str, ...]


def _plan(cfg: EngineConfig, *, production: bool, model_path: str | None, secrets: tuple[str, ...]) -> _Plan:
    notes: list[str] = []
    engine, version = cfg.engine, cfg.version
    flags = dict(cfg.flags)
    if engine == "sim":
        sim = table_for("sim", version)
        dropped = [name for name in flags if (spec := sim.lookup(name)) is not None and spec.sim_only]
        imitated = flags.get("vllm-version")
        version = str(imitated) if isinstance(imitated, str) else version
        flags = {k: v for k, v in flags.items() if k not in dropped}
        engine = "vllm"
        notes.append(
            "a simulated config: this is the vLLM launch it imitates"
            + (f" (vLLM {version})" if version else "")
            + (f"; dropped the simulator's own flags {', '.join('--' + d for d in dropped)}" if dropped else "")
        )
    if production:
        for name, (value, why) in DEV_ONLY.items():
            if flags.get(name) == value:
                del flags[name]
                notes.append(f"dropped --{name} {value}: {why}")
    model, model_note = _model(cfg.model, model_path)
    if model_note:
        notes.append(model_note)
    words: list[Word] = []
    # the config's flags are canonical for its own engine; a simulated config's are re-read as vLLM's
    write = canonical_argv if engine == cfg.engine else to_argv
    for name, value in flags.items():
        argv = write(engine, {name: value}, version=version)
        if argv and is_secret_flag(name, secrets) and (texts := secret_texts(value)):
            var = secret_env(engine, name.lstrip("-"))
            words += _referenced(argv, texts, var)
            notes.append(f"set {var} in the environment: the value of --{name.lstrip('-')} is not written here")
        else:
            words += argv
    env: list[tuple[str, Word]] = []
    for key, value in cfg.env.items():
        if is_secret_name(key, secrets):
            env.append((key, EnvRef(key)))
            notes.append(f"set {key} in the environment: its value is not written here")
        else:
            env.append((key, value))
    # Clients keep the name servetune ran with: a bundled config's short name, or the model as first given.
    bundled = _bundled_name(cfg.model)
    served = cfg.served_model_name or bundled or (cfg.model if model != cfg.model else None)
    return _Plan(engine, version, model, served, words, env, tuple(dict.fromkeys(notes)))


def _referenced(argv: list[str], texts: list[str], var: str) -> list[Word]:
    """A secret flag's words with each value replaced by a reference: the first to `var`, the next ones to
    `var_2`, … (one per key of a list); a `--flag=value` word keeps its form (`--flag=` + the reference)."""
    refs = {text: var if i == 0 else f"{var}_{i + 1}" for i, text in enumerate(dict.fromkeys(texts))}
    out: list[Word] = []
    for word in argv:
        option, eq, inline = word.partition("=")
        if eq and option.startswith("-") and inline in refs:
            out.append(EnvRef(refs[inline], f"{option}="))
        elif word in refs:
            out.append(EnvRef(refs[word]))
        else:
            out.append(word)
    return out


def _model(model: str, model_path: str | None) -> tuple[str, str | None]:
    """The model argument: a bundled config name (or its packaged folder) becomes `model_path` or a placeholder."""
    name = _bundled_name(model)
    if name is None:
        return (model_path or model), None
    if model_path:
        return model_path, None
    hf_id = _hf_id(name)
    return f"/path/to/{name}", (
        f"{name} is a planner config bundled with servetune, not a checkpoint: replace /path/to/{name} with the "
        "folder of the real checkpoint" + (f" (Hugging Face: {hf_id})" if hf_id else "")
    )


def _bundled_name(model: str) -> str | None:
    path = Path(model)
    if path.parent == BUNDLED_DIR:
        return path.name
    if "/" in model or path.exists():
        return None  # a Hugging Face id, or a real folder that happens to share a bundled name
    return model.lower() if bundled_model(model) is not None else None


def _hf_id(name: str) -> str | None:
    """The Hugging Face id a bundled config names in its `_name_or_path`, when it names one (`org/model`)."""
    path = bundled_model(name)
    try:
        config = json.loads((path / "config.json").read_text()) if path else {}
    except (OSError, ValueError):
        return None
    value = config.get("_name_or_path") if isinstance(config, dict) else None
    return value if isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value) else None


def _local_path(model: str) -> bool:
    """A host path (mounted into the container) rather than a Hugging Face id (`org/name`)."""
    return model.startswith(("/", "./", "../", "~")) or Path(model).exists()


def _option_lines(words: list[Word]) -> list[list[Word]]:
    """Flag words grouped one option (and its values) per line."""
    lines: list[list[Word]] = []
    for word in words:
        starts_option = isinstance(word, str) and word.startswith("-") and not re.match(r"^-\.?\d", word)
        if starts_option or not lines or (isinstance(word, EnvRef) and word.prefix.startswith("-")):
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


def _quote(word: Word) -> str:
    return (
        f'{shlex.quote(word.prefix) if word.prefix else ""}"${word.name}"'
        if isinstance(word, EnvRef)
        else shlex.quote(word)
    )


def _plain(word: Word) -> str:
    return f"{word.prefix}${word.name}" if isinstance(word, EnvRef) else word


def _command(lines: list[list[Word]], *, env: list[tuple[str, Word]], notes: tuple[str, ...]) -> Command:
    """The Command of grouped words; `env` are `NAME=value` assignments written before the first line (the name
    unquoted, so that the shell reads an assignment)."""
    rendered = [" ".join(_quote(w) for w in line) for line in lines if line]
    assignments = " ".join(f"{k}={_quote(v)}" for k, v in env)
    if assignments:
        rendered[0] = f"{assignments} {rendered[0]}"
    argv = tuple(_plain(w) for line in lines for w in line)
    return Command(argv=argv, text=" \\\n  ".join(rendered), notes=notes)


__all__ = [
    "CONTAINER_PORT",
    "DEV_ONLY",
    "Command",
    "EnvRef",
    "Launch",
    "Word",
    "container_launch",
    "docker_command",
    "is_secret_name",
    "launch_commands",
    "serve_command",
]


_LAUNCHERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("vllm", "serve"), "vllm"),
    (("python", "-m", "vllm.entrypoints.openai.api_server"), "vllm"),
    (("python3", "-m", "vllm.entrypoints.openai.api_server"), "vllm"),
    (("llama-server",), "llamacpp"),
    (("python", "-m", "sglang.launch_server"), "sglang"),
    (("python3", "-m", "sglang.launch_server"), "sglang"),
    (("servetune", "sim-serve"), "sim"),
)
_MODEL_FLAGS = {"vllm": ("--model",), "llamacpp": ("-m", "--model"), "sglang": ("--model-path",), "sim": ("--model",)}
_NAME_FLAGS = {
    "vllm": ("--served-model-name",),
    "llamacpp": ("-a", "--alias"),
    "sglang": ("--served-model-name",),
    "sim": ("--served-model-name",),
}


def parse_command(text: str, *, version: str | None = None, allow_unknown: bool = False) -> EngineConfig:
    """The engine config of a pasted launch command (`vllm serve MODEL --max-model-len 32k -tp 2`, `llama-server -m
    M.gguf -c 8192`, `python -m sglang.launch_server --model-path M`): the inverse of `serve_command`, read with the
    same vocabulary. Leading `KEY=value` words become the environment; `--host` and `--port` are servetune's to set
    and are dropped."""
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError as err:
        raise ServetuneError(f"the command cannot be read as shell words: {err}", "check its quotes") from None
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    for prefix, engine in _LAUNCHERS:  # noqa: B007 - `engine` is the one the loop breaks on
        if tuple(w.rsplit("/", 1)[-1] if i == 0 else w for i, w in enumerate(words[: len(prefix)])) == prefix:
            rest = words[len(prefix) :]
            break
    else:
        raise ServetuneError(
            f"not a launch command servetune reads: {text[:80]!r}",
            "give `vllm serve MODEL ...`, `llama-server -m MODEL ...` or `python -m sglang.launch_server ...`",
        )
    model = served = None
    if engine == "vllm" and rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    kept: list[str] = []
    i = 0
    while i < len(rest):
        word = rest[i]
        name, eq, inline = word.partition("=")
        if name in (*_MODEL_FLAGS[engine], *_NAME_FLAGS[engine], "--host", "--port"):
            value = inline if eq else (rest[i + 1] if i + 1 < len(rest) else "")
            if name in _MODEL_FLAGS[engine]:
                model = value
            elif name in _NAME_FLAGS[engine]:
                served = value
            i += 1 if eq else 2
            continue
        kept.append(word)
        i += 1
    if not model:
        raise ServetuneError(f"the command names no model: {text[:80]!r}", "put the model path or id in it")
    flags = parse_argv(engine, kept, version=version, allow_unknown=allow_unknown)
    return EngineConfig(engine=engine, model=model, served_model_name=served, flags=flags, env=env, version=version)  # type: ignore[arg-type]
