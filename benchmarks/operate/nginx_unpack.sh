#!/bin/bash
# On the device: unpacks the .deb files carry.sh downloaded (Debian's nginx and its libraries) into PREFIX (never
# /), and writes PREFIX/bin/nginx: a wrapper that runs that nginx with the unpacked libraries first on its library
# path (for nginx alone: nothing else on the device sees them). servetune runs it when SERVETUNE_NGINX names it.
# Usage: bash nginx_unpack.sh DEBS_DIR PREFIX     (prints `nginx version: ...` when it runs)
set -eu
DEBS=${1:?usage: nginx_unpack.sh DEBS_DIR PREFIX}
P=${2:?usage: nginx_unpack.sh DEBS_DIR PREFIX}
case "$P" in /|/usr|/usr/*|/etc|/etc/*|/lib*|/bin|/sbin) echo "refusing to unpack into $P: give a prefix of its own"; exit 2;; esac
mkdir -p "$P/bin"
for d in "$DEBS"/*.deb; do
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -x "$d" "$P"
  else  # no dpkg: a .deb is an ar archive holding data.tar.*
    python3 - "$d" "$P" <<'PYEOF'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"!<arch>\n", "not a .deb"
pos = 8
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip("/"), int(data[pos + 48:pos + 58])
    body = data[pos + 60:pos + 60 + size]
    if name.startswith("data.tar"):
        archive = tarfile.open(fileobj=io.BytesIO(body))
        try:
            archive.extractall(sys.argv[2], filter="tar")
        except TypeError:  # Python before 3.11.4 has no extraction filters
            archive.extractall(sys.argv[2])
    pos += 60 + size + (size % 2)
PYEOF
  fi
done
LIBS="$P/lib/x86_64-linux-gnu:$P/usr/lib/x86_64-linux-gnu"
cat > "$P/bin/nginx" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$LIBS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$P/usr/sbin/nginx" "\$@"
WRAP
chmod +x "$P/bin/nginx"
"$P/bin/nginx" -v
