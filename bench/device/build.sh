#!/usr/bin/env bash
# Builds titan (no tests) into build-gpu/ against a PyTorch that is already installed, with the
# carried .deps/ (bench/device/carry_deps.sh) as the only source of titan's other dependencies
# when it exists: its CMake and pkg-config files, headers, libraries and protoc. The device
# machine's run (run_gpu_checks.sh) and its rehearsal here (rehearse_build.sh) both call it.
#   TITAN_TORCH_PREFIX=<site-packages>/torch  bash bench/device/build.sh   (else: python3's torch)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="${TITAN_TORCH_PREFIX:-$("${TITAN_PYTHON:-python3}" -c \
  'import os, torch; print(os.path.dirname(torch.__file__))')}"
deps="$root/.deps"
prefixes="$prefix"
extra=()
if [[ -d $deps ]]; then
  arch=x86_64-linux-gnu
  prefixes="$deps/usr;$prefix"
  export PKG_CONFIG_LIBDIR="$deps/usr/lib/$arch/pkgconfig:$deps/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$deps"
  export PATH="$deps/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$deps/usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  extra=(-DOPENSSL_ROOT_DIR="$deps/usr" -DProtobuf_PROTOC_EXECUTABLE="$deps/usr/bin/protoc"
         -DPKG_CONFIG_EXECUTABLE="$deps/usr/bin/pkg-config")
fi
echo "[build] LibTorch $prefix; dependencies ${deps/#$root\//}$([[ -d $deps ]] || echo ' (absent: the system)')"
cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  -DCMAKE_PREFIX_PATH="$prefixes" -DTITAN_PYTHON="${TITAN_PYTHON:-python3}" "${extra[@]}"
ninja -C "$root/build-gpu" titan
