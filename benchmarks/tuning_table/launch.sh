#!/bin/bash
# On the device (or here, for a rehearsal): copies the servetune tree this script sits in to $TT_ROOT/st (the next
# device call lays the working tree anew), writes the deadline and starts run_table.py detached (setsid), which
# measures the grid's variants that neither the tree's data folder nor an earlier launch in $TT_ROOT/dc holds yet.
# Each launch writes its own $TT_ROOT/dc/launch_<k>/ (run_table.py); env.txt and driver.out are appended to.
# Usage: bash launch.sh BUDGET_S   (the driver starts nothing that would end later than BUDGET_S seconds from now,
#                                  or from the epoch second TT_T0; a poll can move it: device_campaign/poll.sh)
# Env: TT_ROOT (default /root/tt; output in $TT_ROOT/dc), TT_PY (python3), TT_PYTHONPATH (/tmp/site: vLLM's bundle),
#      TT_TOKENIZER (/root/models/qwen3.6-27b/tokenizer.json), TT_VLLM (the vllm command), TT_EXTRA_FLAGS (appended to
#      every vllm serve), TT_COMMON_FLAGS (instead of grid.json's common flags), TT_ARGS (more run_table / driver
#      arguments, no spaces inside values).
set -u
BUDGET=${1:?usage: launch.sh BUDGET_S}
R=${TT_ROOT:-/root/tt}
PY=${TT_PY:-python3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ -f "$R/dc/driver.pid" ] && kill -0 "$(cat "$R/dc/driver.pid")" 2>/dev/null; then
  echo "launch.sh: a driver is still running (pid $(cat "$R/dc/driver.pid")): poll it (device_campaign/poll.sh)," \
       "or stop its process group first" >&2
  exit 2
fi
mkdir -p "$R/st/benchmarks" "$R/dc"
rm -f "$R/dc/DONE"  # an earlier launch's: poll.sh waits for this launch's
if [ "$SRC" != "$(cd "$R/st" && pwd)" ]; then  # run from the copy itself (a relaunch): it is already there
  rm -rf "$R/st/src" "$R/st/benchmarks/"*
  cp -r "$SRC/src" "$R/st/"
  for d in device_campaign sim_fidelity tuning_table; do cp -r "$SRC/benchmarks/$d" "$R/st/benchmarks/"; done
fi
echo $(( ${TT_T0:-$(date +%s)} + BUDGET )) > "$R/dc/deadline"
{ echo "== launch $(date -u +%FT%TZ)"; nvidia-smi 2>/dev/null; "$PY" --version; uname -a; nproc; free -g; } \
  >> "$R/dc/env.txt" 2>&1
echo "== launch $(date -u +%FT%TZ)" >> "$R/dc/driver.out"
export PYTHONPATH=${TT_PYTHONPATH:-/tmp/site}:$R/st/src
ARGS=(--out "$R/dc" --deadline-file "$R/dc/deadline" --pid-file "$R/vllm.pid"
      --done-from "$R/st/benchmarks/tuning_table/data"
      --tokenizer "${TT_TOKENIZER:-/root/models/qwen3.6-27b/tokenizer.json}"
      --vllm="${TT_VLLM:-$PY -m vllm.entrypoints.cli.main}" --extra-flags="${TT_EXTRA_FLAGS:-}")
[ -n "${TT_COMMON_FLAGS:-}" ] && ARGS+=(--common-flags="$TT_COMMON_FLAGS")
# shellcheck disable=SC2086
setsid nohup "$PY" "$R/st/benchmarks/tuning_table/run_table.py" "${ARGS[@]}" ${TT_ARGS:-} \
  >> "$R/dc/driver.out" 2>&1 < /dev/null &
echo $! > "$R/dc/driver.pid"
sleep 3
echo "driver pid $(cat "$R/dc/driver.pid"), deadline in $BUDGET s"; tail -n 20 "$R/dc/driver.out"
