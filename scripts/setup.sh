#!/usr/bin/env bash
# Installs the Debian packages titan needs (apt-get only when something is missing), creates the
# Python environment that carries LibTorch (PyTorch from the Python package registry, pinned),
# prepares the default dataset, then configures and builds incrementally into build/.
# Sourced by run_train.sh and run_tests.sh; safe to run again (seconds when nothing changed).
set -euo pipefail

TITAN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TITAN_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config python3-venv
  libgloo-dev
  libtomlplusplus-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libpcre2-dev libutf8proc-dev libssl-dev libgtest-dev
  libprotobuf-dev protobuf-compiler libisal-dev
  bible-kjv
)

titan_install_packages() {
  local missing=()
  for pkg in "${TITAN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]})); then
    echo "[setup] installing: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}

# LibTorch is the pinned PyTorch wheel (CUDA-enabled: one binary runs on CPU with Gloo and on
# GPUs with NCCL); the same environment runs the PyTorch reference of bench/reference. It lives
# outside the checkout so that clones share it (about 5.4 GiB, 2 minutes to create).
TITAN_TORCH_VERSION=2.15.0
# tensorboard: its event reader checks titan's event files in the tests.
TITAN_PYTHON_PACKAGES=("torch==$TITAN_TORCH_VERSION" numpy==2.4.6 tensorboard==2.20.0)
TITAN_VENV="${TITAN_VENV:-$HOME/.cache/titan/venv-torch-$TITAN_TORCH_VERSION}"

titan_python_env() {
  local want="${TITAN_PYTHON_PACKAGES[*]}" stamp="$TITAN_VENV/.titan-packages"
  mkdir -p "$(dirname "$TITAN_VENV")"
  (
    flock 9  # one creator at a time; the others wait and reuse it
    if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
      # A pinned list that changed is installed into the environment that exists (pip moves
      # each package to its pinned version); a missing or broken one is created again.
      if [[ ! -x $TITAN_VENV/bin/pip ]]; then
        echo "[setup] creating $TITAN_VENV"
        rm -rf "$TITAN_VENV"
        /usr/bin/python3 -m venv "$TITAN_VENV"
      fi
      echo "[setup] installing into $TITAN_VENV: $want"
      "$TITAN_VENV/bin/pip" install -q --disable-pip-version-check "${TITAN_PYTHON_PACKAGES[@]}"
      echo "$want" > "$stamp"
    fi
  ) 9> "$TITAN_VENV.lock"
  TITAN_PYTHON="$TITAN_VENV/bin/python"
  export TITAN_PYTHON
}

titan_build() {
  local build_dir="$TITAN_ROOT/build"
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  # One build at a time: two launchers of one checkout (two nodes on one machine) wait their
  # turn rather than racing in the same folder.
  mkdir -p "$build_dir"
  exec 8> "$build_dir.lock"
  flock 8
  local torch_prefix torch_dir
  torch_prefix=$(echo "$TITAN_VENV"/lib/python3*/site-packages/torch)
  torch_dir="$torch_prefix/share/cmake/Torch"
  # A build configured against another LibTorch (or none) starts again.
  if [[ -f $build_dir/CMakeCache.txt ]] &&
     ! grep -qx "Torch_DIR:PATH=$torch_dir" "$build_dir/CMakeCache.txt"; then
    echo "[setup] $build_dir was configured for another LibTorch: reconfiguring"
    rm -rf "$build_dir"
  fi
  if [[ ! -f $build_dir/build.ninja ]]; then
    cmake -S "$TITAN_ROOT" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$torch_prefix" -DTITAN_PYTHON="$TITAN_PYTHON" >/dev/null
  fi
  # ninja's lines for what runs every time (the glob check, the revision stamp) and "no work
  # to do" are left out, so that nothing is printed when nothing changed.
  (cd "$build_dir" && ninja "$@") |
    { grep -v -e 'Re-checking globbed directories\.\.\.$' -e 'cmake/Version\.cmake$' \
        -e '^ninja: no work to do\.$' || true; }
  flock -u 8
}

titan_setup() {
  titan_install_packages
  titan_python_env
  bash "$TITAN_ROOT/scripts/prepare_kjv_bible.sh"
  titan_build "$@"
}
