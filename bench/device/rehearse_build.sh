#!/usr/bin/env bash
# The device machine's build, rehearsed here (issue 42): bench/device/build.sh against that
# machine's PyTorch (2.11.0+cu130: its wheel, downloaded without dependencies and unpacked, not
# run; the CUDA libraries it links against are the project's PyTorch's, the same cu13 sonames)
# and the carried .deps/ alone. The build runs in a mount namespace of its own in which the
# system's copies of titan's dependencies (headers, CMake and pkg-config files, protoc) are
# hidden, so a build that still reached for one fails. Log: bench/results/device-rehearsal-<date>.log
#   bash bench/device/rehearse_build.sh        (as root: unshare and mount; 20 min on 2 cores)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/setup.sh"
version=2.11.0
wheels="$HOME/.cache/titan/torch-$version-cp312"
if [[ ! -d $wheels/site/torch ]]; then
  mkdir -p "$wheels"
  "$TITAN_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 "torch==$version" -d "$wheels"
  unzip -q "$wheels"/torch-$version-*.whl 'torch/include/*' 'torch/lib/*' 'torch/share/*' \
    -d "$wheels/site"
  # CUDA libraries to link against: the project's PyTorch's (the same cu13 sonames), but
  # cuSPARSELt and NVSHMEM at the versions torch 2.11 pins (2.15's lack symbols 2.11 calls).
  "$TITAN_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 -d "$wheels"
  for w in "$wheels"/nvidia_*.whl; do unzip -q -o "$w" 'nvidia/*' -d "$wheels/site"; done
  venv_nvidia="$("$TITAN_VENV/bin/python" -c 'import os, nvidia; print(os.path.dirname(nvidia.__file__))')"
  for d in "$venv_nvidia"/*/; do
    [[ -e $wheels/site/nvidia/$(basename "$d") ]] || ln -s "$d" "$wheels/site/nvidia/"
  done
fi
[[ -d $root/.deps ]] || bash "$root/bench/device/carry_deps.sh"
log="$root/bench/results/device-rehearsal-$(date +%Y%m%d).log"
hidden=(/usr/include/fmt /usr/include/spdlog /usr/include/toml++ /usr/include/nlohmann
        /usr/include/google/protobuf /usr/include/gloo /usr/include/openssl
        /usr/lib/x86_64-linux-gnu/cmake /usr/share/cmake /usr/lib/x86_64-linux-gnu/pkgconfig
        /usr/share/pkgconfig /usr/include/pcre2.h /usr/include/utf8proc.h /usr/include/isa-l.h
        /usr/bin/protoc /usr/bin/pkg-config /usr/bin/pkgconf)
empty=$(mktemp -d)
rm -rf "$root/build-gpu"
{
  echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores; .deps: $(du -sh "$root/.deps" | cut -f1)"
  echo "# hidden: ${hidden[*]}"
  echo "# the device call: run(command='bash bench/device/run_gpu_checks.sh', carry=['.deps'])"
  start=$(date +%s)
  unshare -m bash -c '
    for p in "$@"; do
      if [[ -d $p ]]; then mount --bind "'"$empty"'" "$p"; elif [[ -e $p ]]; then mount --bind /dev/null "$p"; fi
    done
    TITAN_TORCH_PREFIX="'"$wheels/site/torch"'" bash "'"$root"'/bench/device/build.sh"' _ "${hidden[@]}"
  echo "# built in $(( $(date +%s) - start )) s: $(ls -la "$root/build-gpu/titan" | awk '{print $5}') bytes"
  grep -o '"[^"]*/\.deps/[^"]*"' "$root/build-gpu/CMakeCache.txt" | sort -u | head -20
} 2>&1 | tee "$log"
