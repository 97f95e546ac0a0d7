#!/bin/bash
# On the device (or here, for the CPU rehearsal): the operate drill of GPU.md. The first call sets up (nginx from
# the carried Debian packages, servetune's command-line wheels, the model folder), copies this tree to $GD_ROOT/st
# (the next device call lays the working tree anew) and starts gpu_drill.py detached (setsid); every call then
# waits until the drill is done or MAX_WAIT_S passed, and packs everything so far into $OUT/gpu_drill.tgz, with
# $OUT/summary.md once it is done (it prints DRILL_DONE then).
# Usage (repository root): bash benchmarks/operate/gpu_drill.sh [MAX_WAIT_S]     (default 520)
# Env (defaults are the device's):
#   GD_ROOT (/root/gd)  GD_PY (python3)  GD_PYTHONPATH (/tmp/site: vLLM's bundle)  GD_DEBS (.carry/nginx-debs)
#   GD_WHEELS (.carry/stwhl)  OUT (/tmp/gd_out)  GD_ARGS (more gpu_drill.py arguments, split on spaces)
#   GD_BUDGET_S (1200, from the first call's start: the drill starts no phase that would end later; staging vLLM
#   takes about 4 of the device's 30 minutes before it)
#   GD_MODEL_DIR (/root/models/qwen2-7b: made, when missing, from src/servetune/model/configs/qwen2-7b and the
#   tokenizer of GD_TOKENIZER_DIR, /root/models/qwen3.6-27b; a model that exists is used as it is)
set -u
MAX_WAIT=${1:-520}
T0=$(date +%s)
R=${GD_ROOT:-/root/gd}
O=${OUT:-/tmp/gd_out}
PY=${GD_PY:-python3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$R" "$O"
if [ ! -f "$R/drill.pid" ]; then
  NG=$R/nginx
  [ -x "$NG/bin/nginx" ] || bash "$SRC/benchmarks/operate/nginx_unpack.sh" "${GD_DEBS:-$SRC/.carry/nginx-debs}" "$NG" \
    || { echo "nginx could not be unpacked"; exit 1; }
  WHL=${GD_WHEELS:-$SRC/.carry/stwhl}
  if [ -d "$WHL" ] && ls "$WHL"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --target "$R/st-site" "$WHL"/*.whl || { echo "wheels failed"; exit 1; }
  fi
  rm -rf "$R/st" && mkdir -p "$R/st/benchmarks" && cp -r "$SRC/src" "$R/st/" && cp -r "$SRC/benchmarks/operate" "$R/st/benchmarks/"
  MODEL=${GD_MODEL_DIR:-/root/models/qwen2-7b}
  if [ ! -e "$MODEL" ]; then  # the qwen2-7b folder is made once; any other model (a .gguf, `tiny`) is used as given
    TOK=${GD_TOKENIZER_DIR:-/root/models/qwen3.6-27b}
    mkdir -p "$MODEL" && cp "$SRC/src/servetune/model/configs/qwen2-7b/config.json" "$MODEL/" \
      && cp "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$MODEL/" \
      || { rm -rf "$MODEL"; echo "no model folder: is $TOK staged (the vLLM bundle's first part carries it)?"; exit 1; }
  fi
  { date -u; nvidia-smi 2>/dev/null; "$PY" --version; uname -a; nproc; free -g; "$NG/bin/nginx" -v; } > "$R/env.txt" 2>&1
  export PYTHONPATH=${GD_PYTHONPATH-/tmp/site}:$R/st/src:$R/st-site SERVETUNE_NGINX=$NG/bin/nginx
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
  rm -rf "$R/drill"
  # shellcheck disable=SC2086
  setsid nohup "$PY" "$R/st/benchmarks/operate/gpu_drill.py" --out "$R/drill" --model-dir "$MODEL" \
    --deadline $(( T0 + ${GD_BUDGET_S:-1200} )) ${GD_ARGS:-} > "$R/drill.out" 2>&1 < /dev/null &
  echo $! > "$R/drill.pid"
  echo "drill pid $(cat "$R/drill.pid"); budget ${GD_BUDGET_S:-1200} s"
fi
while [ ! -f "$R/drill/DONE" ] && [ $(( $(date +%s) - T0 )) -lt "$MAX_WAIT" ]; do
  kill -0 "$(cat "$R/drill.pid")" 2>/dev/null || { echo "drill not running"; break; }
  sleep 2
done
tail -n 30 "$R/drill.out"
tar -czf "$O/gpu_drill.tgz" -C "$R" drill drill.out env.txt 2>/dev/null
[ -f "$R/drill/summary.md" ] && cp "$R/drill/summary.md" "$R/drill/summary.json" "$O/"
ls -la "$O"
[ -f "$R/drill/DONE" ] && echo DRILL_DONE
exit 0
