#!/usr/bin/env bash
# The client benchmark on a machine with many cores (the H200 host has 16). Three passes, each writing its
# results.json and RESULTS.md under $1 (default benchmarks/client/many-cores/):
#   cost/   the cost section x3 as on a 2-core box: server on CPU 0, every client on CPU 1 (and reads per token
#           where perf is installed);
#   load/   accuracy, Poisson, burst and steady with servetune's workers on CPUs 1-7, mock servers on CPUs 8-15
#           (accuracy and Poisson keep the one server on CPU 0: they compare with its own TTFT);
#   scale/  worker processes 1..8 on CPUs 1-8 against mock servers on CPUs 9-15;
#   burst-1-process/  the burst x3 from one client process on CPU 1 against mock servers on CPUs 8-15 (the
#           2-core box's burst, with the server no longer the limit).
# Tools: servetune, Locust, the bare aiohttp loop and the uvloop floor (setup-peers.sh installs Locust); the
# environment variable NO_AIOHTTP=1 leaves the bare loop out (a reference, not a peer: it saves a quarter of the
# cost pass). PASSES="cost load" runs only those passes (default: all four).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-benchmarks/client/many-cores}"
PY="${BENCH_PYTHON:-python3}"
PASSES="${PASSES:-cost load scale burst1}"
TOOLS=(servetune Locust "floor (uvloop, a stamp per read)")
[[ "${NO_AIOHTTP:-}" == 1 ]] || TOOLS+=("aiohttp (bare loop)")
if [[ " $PASSES " == *" cost "* ]]; then
  BENCH_OUT="$OUT/cost" "$PY" -m benchmarks.client.run --runs 3 --only cost --only reads --tools "${TOOLS[@]}" \
    --client-cpus 1
fi
if [[ " $PASSES " == *" load "* ]]; then
  BENCH_OUT="$OUT/load" "$PY" -m benchmarks.client.run --only accuracy --only ramp --only poisson --only burst \
    --only steady --client-cpus 1-7 --server-cpus 8-15
fi
if [[ " $PASSES " == *" scale "* ]]; then
  BENCH_OUT="$OUT/scale" "$PY" -m benchmarks.client.run --only scaling --client-cpus 1-8 --server-cpus 9-15
fi
if [[ " $PASSES " == *" burst1 "* ]]; then
  BENCH_OUT="$OUT/burst-1-process" "$PY" -m benchmarks.client.run --only burst --runs 3 --client-cpus 1 \
    --server-cpus 8-15 --workers 1
fi
echo "many-cores: done"
