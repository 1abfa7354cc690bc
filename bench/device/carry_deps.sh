#!/usr/bin/env bash
# Makes .deps/ in the checkout: the Debian packages titan's build needs (scripts/setup.sh's
# -dev packages and the libraries they link), unpacked with dpkg -x, for the device machine,
# which has none of them and reaches no package registry. Run here (it downloads), then name
# .deps in the device call's `carry`; bench/device/build.sh finds it. About 24 MiB.
#   bash bench/device/carry_deps.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deps="$root/.deps"
packages=(
  libtomlplusplus-dev libtomlplusplus3 nlohmann-json3-dev libfmt-dev libfmt9
  libspdlog-dev libspdlog1.10 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0
  libpcre2-posix3 libutf8proc-dev libutf8proc2 libprotobuf-dev libprotobuf32 libprotobuf-lite32
  protobuf-compiler libprotoc32 libisal-dev libisal2 libgloo-dev libssl-dev libssl3 zlib1g-dev
  pkgconf pkgconf-bin libpkgconf3
)
rm -rf "$deps"
mkdir -p "$deps/debs"
(cd "$deps/debs" && apt-get download -q "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$deps"; done
rm -rf "$deps/debs" "$deps/usr/share/doc" "$deps/usr/share/man"
find "$deps" -name '*.a' -delete  # titan links the shared libraries
echo "[carry_deps] $(du -sh "$deps" | cut -f1) in $deps: ${#packages[@]} packages"
