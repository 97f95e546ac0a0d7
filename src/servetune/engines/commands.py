"""The one emitter of commands a user pastes: `vllm serve …`, `docker run … vllm/vllm-openai:vX.Y.Z …`,
`llama-server …` and `python -m sglang.launch_server …`, for `plan` and `tune` alike.

A printed command is servetune's answer, so it must work as pasted and must not leak: the image tag is the
engine version servetune measured; a host model folder is bind-mounted read-only (never a named volume); a
bundled planner config name (`qwen3.6-27b`, not a Hugging Face id) is replaced by the user's path or a marked
placeholder; settings that only make sense inside servetune (`--load-format dummy`, the simulator's own flags)
are dropped with a note; API keys and secret-looking environment values are written as `"$VAR"` references.
Flags are written by `servetune.engines.vocab.to_argv`, the same writer every launch uses.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from servetune.engines.config import EngineConfig
from servetune.engines.flagtable import table_for
from servetune.engines.vocab import normalize_flags, parse_argv, to_argv
from servetune.errors import ServetuneError
from servetune.model.bundled import BUNDLED_DIR, bundled_model
from servetune.secrets import is_secret_flag, is_secret_name

DEV_ONLY: dict[str, tuple[object, str]] = {
    "load-format": ("dummy", "it serves random weights, a servetune test setting; production loads the checkpoint"),
}
"""Flag values that only make sense in a servetune test run: (value, why), dropped from production commands."""

_API_KEY_ENV = {"vllm": "VLLM_API_KEY", "sim": "VLLM_API_KEY", "llamacpp": "LLAMA_API_KEY", "sglang": "SGLANG_API_KEY"}
"""The environment variable each engine itself reads its API key from, so the reference is the natural one."""


@dataclass(frozen=True)
class Command:
    """A command to paste: `argv` (a secret appears as its `$VAR` reference), `text` (shell text, one option per
    line joined by ` \\` + newline) and `notes` (what the user must know or do before running it)."""

    argv: tuple[str, ...]
    text: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Ref:
    """A shell reference to an environment variable, written `"$NAME"` (quoted so the shell expands it once),
    after `prefix` (`-e HF_TOKEN="$HF_TOKEN"` is one word with prefix `HF_TOKEN=`)."""

    name: str
    prefix: str = ""


_Word = str | _Ref


def serve_command(
    cfg: EngineConfig, *, production: bool = True, model_path: str | None = None, secrets: tuple[str, ...] = ()
) -> Command:
    """The engine's own launch command for `cfg`: `vllm serve MODEL …` (a `sim` config becomes the vLLM command
    it simulates), `llama-server -m MODEL --alias NAME …`, `python -m sglang.launch_server --model-path …`.

    `production` drops servetune's test settings with a note each; `model_path` replaces a bundled config name
    (without it, a `/path/to/NAME` placeholder and a note); `secrets` names more environment variables or flags
    whose values must not be written."""
    plan = _plan(cfg, production=production, model_path=model_path, secrets=secrets)
    if plan.engine == "vllm":
        head: list[list[_Word]] = [["vllm", "serve", plan.model]]
        named: list[_Word] = ["--served-model-name", plan.served] if plan.served else []
    elif plan.engine == "llamacpp":
        head = [["llama-server"], ["-m", plan.model]]
        named = ["--alias", plan.served] if plan.served else []
    else:
        head = [["python", "-m", "sglang.launch_server"], ["--model-path", plan.model]]
        named = ["--served-model-name", plan.served] if plan.served else []
    lines: list[list[_Word]] = [*head, *([named] if named else []), *_option_lines(plan.flags)]
    return _command(lines, env=plan.env, notes=plan.notes)


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

    The tag is pinned from `cfg.version` (`:latest` only when the version is unknown, with a note). The model
    folder (`host_model_dir`, else `model_path` or `cfg.model` when it is a local path) is bind-mounted read-only
    at `/models/NAME` and passed as that in-container path; a Hugging Face id is passed as is, with the host's
    Hugging Face cache mounted. `--ipc=host` (PyTorch's shared memory), the NVIDIA runtime with `gpus`, and
    `-p PORT:8000`. `production` runs it detached with a restart policy (else `--rm` in the foreground)."""
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
        tag = _release(plan.version)
        image = f"vllm/vllm-openai:v{tag}" if tag else "vllm/vllm-openai:latest"
        if not tag:
            notes.append(
                "the vLLM version is unknown, so the image is vllm/vllm-openai:latest: "
                "pin the tag of the version you measured (vllm/vllm-openai:vX.Y.Z)"
            )
    source = host_model_dir or (plan.model if _local_path(plan.model) else None)
    if source:
        name = PurePosixPath(source.rstrip("/")).name or "model"
        inside = f"/models/{name}"
        mount: list[_Word] = ["-v", f"{source}:{inside}:ro"]
    else:
        inside = plan.model  # a Hugging Face id: vLLM downloads it into the mounted cache
        mount = ["-v", "~/.cache/huggingface:/root/.cache/huggingface"]
    served = plan.served or (cfg.name if inside != cfg.name else None)
    restart: list[list[_Word]] = [["--restart", "unless-stopped"]] if production else []
    named: list[list[_Word]] = [["--served-model-name", served]] if served else []
    run: list[list[_Word]] = [
        ["docker", "run", "-d" if production else "--rm"],
        ["--name", container_name],
        *restart,
        ["--runtime", "nvidia", "--gpus", str(gpus)],
        ["--ipc=host"],
        ["-p", f"{port}:8000"],
        mount,
        *[["-e", _Ref(v.name, f"{k}=") if isinstance(v, _Ref) else f"{k}={v}"] for k, v in plan.env],
        [image],
        [inside],
        *named,
        *_option_lines(plan.flags),
    ]
    return _command(run, env=[], notes=tuple(notes))


@dataclass(frozen=True)
class _Plan:
    """What a command says, engine-neutral: model, served name, flags (with secrets as references), env, notes."""

    engine: str
    version: str | None
    model: str
    served: str | None
    flags: list[_Word]
    env: list[tuple[str, _Word]]
    notes: tuple[str, ...]


def _plan(cfg: EngineConfig, *, production: bool, model_path: str | None, secrets: tuple[str, ...]) -> _Plan:
    notes: list[str] = []
    engine, version = cfg.engine, cfg.version
    flags = normalize_flags(engine, cfg.flags, version=version, allow_unknown=True)
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
    words: list[_Word] = []
    for name, value in flags.items():
        argv: list[_Word] = list(to_argv(engine, {name: value}, version=version))
        if argv and isinstance(value, str | list) and is_secret_flag(name, secrets):
            ref = _Ref(_API_KEY_ENV[engine] if name == "api-key" else name.upper().replace("-", "_"))
            argv = [str(argv[0]).partition("=")[0], ref]
            notes.append(f"set {ref.name} in the environment: the value of --{name} is not written here")
        words += argv
    env: list[tuple[str, _Word]] = []
    for key, value in cfg.env.items():
        if is_secret_name(key, secrets):
            env.append((key, _Ref(key)))
            notes.append(f"set {key} in the environment: its value is not written here")
        else:
            env.append((key, value))
    # Clients keep the name servetune ran with: a bundled config's short name, or the model as first given.
    bundled = _bundled_name(cfg.model)
    served = cfg.served_model_name or bundled or (cfg.model if model != cfg.model else None)
    return _Plan(engine, version, model, served, words, env, tuple(dict.fromkeys(notes)))


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


def _release(version: str | None) -> str | None:
    """The X.Y.Z release of an engine version (`0.24.0+cpu` → `0.24.0`), the part image tags carry."""
    m = re.match(r"v?(\d+\.\d+\.\d+)", version or "")
    return m.group(1) if m else None


def _local_path(model: str) -> bool:
    """A host path (mounted into the container) rather than a Hugging Face id (`org/name`)."""
    return model.startswith(("/", "./", "../", "~")) or Path(model).exists()


def _option_lines(words: list[_Word]) -> list[list[_Word]]:
    """Flag words grouped one option (and its values) per line."""
    lines: list[list[_Word]] = []
    for word in words:
        starts_option = isinstance(word, str) and word.startswith("-") and not re.match(r"^-\.?\d", word)
        if starts_option or not lines:
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


def _quote(word: _Word) -> str:
    return (
        f'{shlex.quote(word.prefix) if word.prefix else ""}"${word.name}"'
        if isinstance(word, _Ref)
        else shlex.quote(word)
    )


def _plain(word: _Word) -> str:
    return f"{word.prefix}${word.name}" if isinstance(word, _Ref) else word


def _command(lines: list[list[_Word]], *, env: list[tuple[str, _Word]], notes: tuple[str, ...]) -> Command:
    """The Command of grouped words; `env` are `NAME=value` assignments written before the first line (the name
    unquoted, so that the shell reads an assignment)."""
    rendered = [" ".join(_quote(w) for w in line) for line in lines if line]
    assignments = " ".join(f"{k}={_quote(v)}" for k, v in env)
    if assignments:
        rendered[0] = f"{assignments} {rendered[0]}"
    argv = tuple(_plain(w) for line in lines for w in line)
    return Command(argv=argv, text=" \\\n  ".join(rendered), notes=notes)


__all__ = ["DEV_ONLY", "Command", "docker_command", "is_secret_name", "serve_command"]


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
