#!/bin/bash
# Here, before a GPU drill: what the device lacks and cannot download (it reaches no registry), into git-ignored
# folders the drill's call carries:
#   .carry/nginx-debs/  Debian's nginx and the libraries it links besides libc (`ldd /usr/sbin/nginx`: libcrypt,
#                       libpcre2-8, libssl/libcrypto, zlib), as .deb files: nginx_unpack.sh unpacks them there
#   .carry/stwhl/       servetune's command line's wheels the device image lacks (typer and rich with their
#                       dependencies), at the versions installed here, for Python 3.12
# Usage (repository root): bash benchmarks/operate/carry.sh
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEBS=$ROOT/.carry/nginx-debs
WHL=$ROOT/.carry/stwhl
mkdir -p "$DEBS" "$WHL"
rm -f "$DEBS"/*.deb
(cd "$DEBS" && apt-get download nginx nginx-common libcrypt1 libpcre2-8-0 libssl3 zlib1g 2>&1 | grep -v "^W: Download is performed unsandboxed")
PY=${PY:-$ROOT/.venv/bin/python}
PINS=$("$PY" - <<'PYEOF'
import importlib.metadata as m
print(" ".join(f"{d}=={m.version(d)}" for d in ("typer", "rich", "markdown-it-py", "mdurl", "pygments", "shellingham", "annotated-doc")))
PYEOF
)
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  -d "$WHL" $PINS
ls -la "$DEBS" "$WHL"
du -sh "$DEBS" "$WHL"
