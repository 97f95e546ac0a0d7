#!/usr/bin/env bash
# Deployment files for the seed systems' plans (examples/plans/*.json) and for a real tuning folder
# (tests/operate/data/tune-tiny). Usage: bash examples/deploy/run.sh  (no GPU, no download, ~10 s)
# Cold start: the seeds have no measured one; the H200 runs of the same model (benchmarks/device/README.md,
# Qwen3.6-27B with vLLM 0.24.0: settings A 251 s, B ~200 s, C 251 s) are the only measurements there are.
set -euo pipefail
cd "$(dirname "$0")"
ST=(${SERVETUNE:-../../.venv/bin/servetune})
COLD=(--cold-start-s 251 --cold-start-source "benchmarks/device/README.md: measured H200 cold starts of Qwen3.6-27B, vLLM 0.24.0 (A 251 s, B ~200 s, C 251 s); no cold start was measured on the seed's own GPUs")
deploy() {  # name, plan, extra args
  local name=$1 plan=$2; shift 2
  rm -rf "$name"
  "${ST[@]}" deploy "../plans/$plan.json" --out "$name" --name "$name" "${COLD[@]}" "$@" > /dev/null
}
deploy seed000 000-2xa100-pcie-tp2-128k
deploy seed001 001-2xa100-sxm-kv-fp8-mtp2
deploy seed002 002-1xa100-int4-128k --slo ttft_p99_ms=380   # seed 002's stated goal: first token within 380 ms
deploy seed003 003-1xv100-int4-32k
deploy seed004 004-a10g-qwen2-7b-32k
rm -rf tiny-llamacpp
"${ST[@]}" deploy ../../tests/operate/data/tune-tiny --out tiny-llamacpp --name tiny > /dev/null
echo "wrote $(find . -type f ! -name run.sh ! -name README.md | wc -l) files"
