#!/usr/bin/env bash
# Trains a model: installs what is missing, builds, then starts NGPU workers on this node.
#   NGPU=2 MODULE=llama3 CONFIG=llama3_debugmodel ./run_train.sh --training.steps 10
# Environment (TorchTitan's names): NGPU, NNODES, NODE_RANK, RDZV_ENDPOINT, MODULE, CONFIG,
# LOG_RANK, COMM_MODE, MAX_RESTARTS. Every argument is a config override (--section.key value);
# a first argument --validate runs `titan validate` on the config instead.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup.sh"
titan_setup titan >&2

MODULE="${MODULE:-llama3}"
# Without CONFIG, titan starts from the module's debug config (<module>_debugmodel).
CONFIG="${CONFIG:-${CONFIG_FILE:-}}"
config=()
[ -n "$CONFIG" ] && config=(--config "$CONFIG")
if [ "${1:-}" = "--validate" ]; then  # the config shortened, run, resumed and checked
  shift
  exec "$TITAN_ROOT/build/titan" validate --module "$MODULE" "${config[@]}" "$@"
fi
exec "$TITAN_ROOT/build/titan" launch --module "$MODULE" "${config[@]}" "$@"
