#!/bin/bash
# Fidelity campaign on the device: measures the running vLLM server at the simulator's load points.
#
#   bash benchmarks/sim_fidelity/device_campaign.sh SETTING [START]
#
# SETTING: A = --max-model-len 131072 --language-model-only --additional-config '{"gdn_prefill_backend":"triton"}'
#          B = A + --max-num-seqs 32 --max-num-batched-tokens 2048
# START=start: first (re)start vLLM with that setting through /root/bin/vllm_up.sh (name sim_SETTING);
# a cold start takes 2.5-5 minutes, so better start it in its own device call (`vllm_up.sh sim_A ...`) and
# run this script without START in the next one. Either way the server must answer on 127.0.0.1:8000
# with the served name m.
# Writes $OUT/SETTING/: campaign.json, <point>.jsonl, <point>.summary.json, <point>.metrics.{before,after}.prom,
# vllm_startup.log (from /root/logs/sim_SETTING.log or $LOG), env.txt. Takes about 3-4 minutes per setting.
set -u
SETTING=${1:?usage: device_campaign.sh SETTING [start]}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DEST=${OUT:-/tmp/out}/$SETTING
mkdir -p "$DEST"
BASE_FLAGS=(--max-model-len 131072 --language-model-only --additional-config '{"gdn_prefill_backend":"triton"}')
case "$SETTING" in
  A) FLAGS=("${BASE_FLAGS[@]}") ;;
  B) FLAGS=("${BASE_FLAGS[@]}" --max-num-seqs 32 --max-num-batched-tokens 2048) ;;
  *) echo "unknown setting $SETTING (A or B)"; exit 2 ;;
esac
printf '%s\n' "${FLAGS[@]}" > "$DEST/flags.txt"
if [ "${2:-}" = "start" ]; then
  bash /root/bin/vllm_up.sh "sim_$SETTING" /root/models/qwen3.6-27b "${FLAGS[@]}" || exit 1
fi
curl -sf http://127.0.0.1:8000/health >/dev/null || { echo "no vLLM server on 127.0.0.1:8000"; exit 1; }
# The server's log: $LOG, else the one vllm_up.sh wrote for sim_SETTING, else the newest in /root/logs.
LOGFILE=${LOG:-/root/logs/sim_$SETTING.log}
[ -f "$LOGFILE" ] || LOGFILE=$(ls -t /root/logs/*.log 2>/dev/null | head -1)
[ -n "$LOGFILE" ] && [ -f "$LOGFILE" ] && cp "$LOGFILE" "$DEST/vllm_startup.log" && echo "startup log: $LOGFILE"
{ nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm --format=csv 2>/dev/null; python3 --version; } > "$DEST/env.txt"
export PYTHONPATH=/tmp/site:$ROOT/src
# Exact prompt lengths from the model directory's tokenizer when `tokenizers` is importable here,
# else from the server's /tokenize (servetune's client picks).
TOK=()
python3 -c "import tokenizers" 2>/dev/null && [ -f /root/models/qwen3.6-27b/tokenizer.json ] \
  && TOK=(--tokenizer /root/models/qwen3.6-27b/tokenizer.json)
T0=$(date +%s)
python3 "$HERE/campaign.py" --setting "$SETTING" --out "$DEST" ${TOK[@]+"${TOK[@]}"} ${CAMPAIGN_ARGS:-}
RC=$?
# The server log after the run too (periodic throughput lines, any errors under load).
[ -n "$LOGFILE" ] && [ -f "$LOGFILE" ] && cp "$LOGFILE" "$DEST/vllm_full.log"
echo "campaign $SETTING rc=$RC in $(( $(date +%s) - T0 )) s -> $DEST"
exit $RC
