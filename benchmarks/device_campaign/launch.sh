#!/bin/bash
# On the device, in the call that carries the last vLLM part (after stage.sh unpacked it): copies the carried
# servetune tree to $DC_ROOT/st (the next call lays the working tree anew), makes the model directories
# (config.json from models/ here, else the bundled one in src/servetune/model/configs, + the shared tokenizer),
# writes plan.json and the deadline, and starts driver.py detached (setsid). Usage: bash launch.sh BUDGET_S
#   BUDGET_S: seconds from now (or from the epoch second DC_T0) by which the driver must have finished
#   (it skips what would not fit).
# Env: DC_ROOT (default /root), DC_PLAN (a ready plan.json instead of campaign.py's), DC_DRIVER_ARGS (extra
# driver arguments without spaces inside values), DC_VLLM (the vllm command), DC_EXTRA_FLAGS (appended to every
# vllm serve), DC_PY (python, default python3), DC_PYTHONPATH (default /tmp/site), DC_TOKENIZER_DIR.
set -u
BUDGET=${1:?usage: launch.sh BUDGET_S}
R=${DC_ROOT:-/root}
PY=${DC_PY:-python3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$R/st" "$R/dc"
rm -rf "$R/st/src" "$R/st/benchmarks"
cp -r "$SRC/src" "$SRC/benchmarks" "$R/st/"
HERE=$R/st/benchmarks/device_campaign
TOK=${DC_TOKENIZER_DIR:-$R/models/qwen3.6-27b}
for m in qwen3.6-27b qwen3-32b qwen3-30b-a3b qwen3.6-35b-a3b qwen2-7b; do
  mkdir -p "$R/models/$m"
  CFG=$HERE/models/$m/config.json; [ -f "$CFG" ] || CFG=$R/st/src/servetune/model/configs/$m/config.json
  cp "$CFG" "$R/models/$m/config.json"
  [ -f "$R/models/$m/tokenizer.json" ] || cp "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$R/models/$m/" 2>/dev/null
done
if [ -n "${DC_PLAN:-}" ]; then cp "$DC_PLAN" "$R/dc/plan.json"
else "$PY" "$HERE/campaign.py" plan --models-root "$R/models" --out "$R/dc/plan.json" || exit 1; fi
echo $(( ${DC_T0:-$(date +%s)} + BUDGET )) > "$R/dc/deadline"
{ date -u; nvidia-smi 2>/dev/null; "$PY" --version; uname -a; nproc; free -g; } > "$R/dc/env.txt" 2>&1
export PYTHONPATH=${DC_PYTHONPATH:-/tmp/site}:$R/st/src
cd "$HERE" || exit 1
# shellcheck disable=SC2086
setsid nohup "$PY" driver.py --plan "$R/dc/plan.json" --out "$R/dc" --deadline-file "$R/dc/deadline" \
  --pid-file "$R/vllm.pid" --tokenizer "$TOK/tokenizer.json" --vllm="${DC_VLLM:-$PY -m vllm.entrypoints.cli.main}" \
  --extra-flags="${DC_EXTRA_FLAGS:-}" ${DC_DRIVER_ARGS:-} \
  > "$R/dc/driver.out" 2>&1 < /dev/null &
echo $! > "$R/dc/driver.pid"
sleep 3
echo "driver pid $(cat "$R/dc/driver.pid"), deadline in $BUDGET s"; cat "$R/dc/driver.out"
