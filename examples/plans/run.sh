#!/usr/bin/env bash
# Plans the five seed systems (../shared/seeds) with `servetune plan` and writes each answer as text and JSON.
# Models are servetune's bundled configs (shapes only): no download, no GPU. Usage: bash examples/plans/run.sh
set -euo pipefail
cd "$(dirname "$0")"
ST=${SERVETUNE:-../../.venv/bin/servetune}
MTP2='{"method": "mtp", "num_speculative_tokens": 2}'
MTP4='{"method": "mtp", "num_speculative_tokens": 4}'
plan() {  # name, then servetune plan arguments
  local name=$1; shift
  python3 -c 'import shlex, sys; print("$ servetune plan " + shlex.join(sys.argv[1:]))' "$@" > "$name.txt"
  COLUMNS=130 "$ST" plan "$@" >> "$name.txt"
  "$ST" plan "$@" --json > "$name.json"
}
plan 000-2xa100-pcie-tp2-128k --model qwen3.6-27b --gpu A100-80G-PCIex2 --tp 2 --max-model-len 128K --language-model-only
for kv in auto fp8; do
  for k in 2 4; do
    spec=$MTP2; [ "$k" = 4 ] && spec=$MTP4
    plan "001-2xa100-sxm-kv-$kv-mtp$k" --model qwen3.6-27b --gpu A100-80G-SXMx2 --tp 2 --max-model-len 128K \
      --language-model-only --enable-prefix-caching --kv-cache-dtype "$kv" --speculative-config "$spec" --vllm-version 0.19.1
  done
done
plan 002-1xa100-int4-128k --model qwen3.6-27b --gpu A100-80G-SXM --quantization awq --max-model-len 128K \
  --max-num-seqs 256 --language-model-only
plan 003-1xv100-bf16-32k --model qwen3.6-27b --gpu V100-32G --max-model-len 32768 --language-model-only
plan 003-1xv100-int4-32k --model qwen3.6-27b --gpu V100-32G --quantization gptq --dtype float16 --max-model-len 32768 \
  --language-model-only
plan 004-a10g-qwen2-7b-32k --model qwen2-7b --gpu A10G --max-model-len 32768
plan 004-a10g-qwen2-7b-default --model qwen2-7b --gpu A10G
echo "wrote $(ls ./*.txt | wc -l) plans"
COLUMNS=140 "$ST" plan-seeds > summary.txt
