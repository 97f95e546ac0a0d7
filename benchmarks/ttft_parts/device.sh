#!/bin/bash
# On the device, in one call, once vLLM is staged (../shared/device/README.md: /tmp/site holds vLLM 0.24.0, the
# shared tokenizer is in /root/models/qwen3.6-27b): serves the bundled Qwen2-7B config with dummy weights, measures
# its load points with the TTFT's parts (measure.py), stops the server, and leaves everything in $OUT:
#   $OUT/ttft_parts.tgz   bench/ (servetune run files + vLLM result JSON per point, with the engine's split),
#                         prom/ (vLLM's /metrics before and after each point), vllm.log, env.txt, plan.json
#   $OUT/summary.txt      one line per point: client TTFT = queue + prefill + API server + HTTP
# Usage (from the repository root): bash benchmarks/ttft_parts/device.sh
# Env (defaults are the device's; the rehearsal in README.md overrides them):
#   TP_BUDGET_S   seconds from now by which everything, the stop included, must be done (280)
#   TP_PY         python (python3)          TP_PYTHONPATH  vLLM's site (/tmp/site)
#   TP_SERVE      the command that takes the model folder next (python -m vllm.entrypoints.cli.main serve)
#   TP_MODEL_DIR  the served folder (/root/models/qwen2-7b: made from src/servetune/model/configs/qwen2-7b and the
#                 tokenizer in TP_TOKENIZER_DIR, /root/models/qwen3.6-27b)
#   TP_FLAGS      vllm serve flags (--max-model-len 8192 --load-format dummy)   TP_EXTRA_FLAGS  appended to them
#   TP_ARGS       more measure.py arguments (--scale 0.25 --token-scale 0.25 for a CPU rehearsal)
#   PORT (8000), OUT (/tmp/ttft_parts_out)
set -u
T0=$(date +%s)
BUDGET=${TP_BUDGET_S:-280}
PY=${TP_PY:-python3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
O=${OUT:-/tmp/ttft_parts_out}
W=$(mktemp -d /tmp/ttft_parts.XXXXXX)
PORT=${PORT:-8000}
TOK=${TP_TOKENIZER_DIR:-/root/models/qwen3.6-27b}
MODEL=${TP_MODEL_DIR:-/root/models/qwen2-7b}
mkdir -p "$O" "$W/prom"
if [ ! -f "$MODEL/config.json" ]; then
  mkdir -p "$MODEL"
  cp "$SRC/src/servetune/model/configs/qwen2-7b/config.json" "$MODEL/"
  cp "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$MODEL/" 2>/dev/null
fi
{ date -u; nvidia-smi 2>/dev/null; "$PY" --version; uname -a; nproc; free -g; } > "$W/env.txt" 2>&1
export PYTHONPATH=${TP_PYTHONPATH-/tmp/site}:$SRC/src HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
# shellcheck disable=SC2086
setsid ${TP_SERVE:-$PY -m vllm.entrypoints.cli.main serve} "$MODEL" --host 127.0.0.1 --port "$PORT" \
  --served-model-name m ${TP_FLAGS:---max-model-len 8192 --load-format dummy} ${TP_EXTRA_FLAGS:-} \
  > "$W/vllm.log" 2>&1 < /dev/null &
PGID=$!
stop() {  # the server's process group, by its id: TERM, then KILL after 20 s
  kill -TERM -- -"$PGID" 2>/dev/null
  for _ in $(seq 1 20); do kill -0 -- -"$PGID" 2>/dev/null || return 0; sleep 1; done
  kill -KILL -- -"$PGID" 2>/dev/null
}
pack() {
  tar -czf "$O/ttft_parts.tgz" -C "$W" . && rm -rf "$W"
  ls -la "$O"
}
trap 'stop; pack' EXIT
READY=""
while [ $(( $(date +%s) - T0 )) -lt $(( BUDGET - 60 )) ]; do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && { READY=$(( $(date +%s) - T0 )); break; }
  kill -0 "$PGID" 2>/dev/null || { echo "SERVER DIED after $(( $(date +%s) - T0 )) s"; tail -n 30 "$W/vllm.log"; exit 1; }
  sleep 1
done
[ -n "$READY" ] || { echo "not ready within $(( BUDGET - 60 )) s"; tail -n 30 "$W/vllm.log"; exit 1; }
echo "READY after $READY s"
grep -E "non-default args|Model loading took|Available KV|GPU KV cache size|Maximum concurrency|init engine" \
  "$W/vllm.log" | tail -8
# measure.py starts no point that would end later than the deadline (25 s kept for the stop and the tar)
# shellcheck disable=SC2086
"$PY" "$SRC/benchmarks/ttft_parts/measure.py" --url "http://127.0.0.1:$PORT" --model m \
  --tokenizer "$MODEL/tokenizer.json" --out "$W" --deadline $(( T0 + BUDGET - 25 )) --ready-s "$READY" ${TP_ARGS:-}
RC=$?
cp "$W/summary.txt" "$O/summary.txt" 2>/dev/null
echo "done after $(( $(date +%s) - T0 )) s (measure.py exit $RC)"
exit $RC
