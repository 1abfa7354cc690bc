#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs the whole suite under ctest.
# Extra arguments go to ctest (e.g. ./run_tests.sh -R config).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup.sh"
titan_setup
cd "$TITAN_ROOT/build"
ctest --output-on-failure --timeout 900 -j 2 "$@"
