#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs the whole suite under ctest.
# Extra arguments go to ctest (e.g. ./run_tests.sh -R config).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup.sh"
titan_setup
cd "$TITAN_ROOT/build"
# ctest runs two tests at once and a test may start several ranks: one intra-op thread per
# process keeps OpenMP workers from spin-waiting on each other's cores (about 2x faster here).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
ctest --output-on-failure --timeout 900 -j 2 "$@"
