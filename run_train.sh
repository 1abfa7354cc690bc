#!/usr/bin/env bash
# Trains a model: installs what is missing, builds, then starts NGPU workers on this node.
#   NGPU=2 MODULE=llama3 CONFIG=llama3_debugmodel ./run_train.sh --training.steps 10
# Environment (TorchTitan's names): NGPU, NNODES, NODE_RANK, RDZV_ENDPOINT, MODULE, CONFIG,
# LOG_RANK, COMM_MODE. Every argument is a config override (--section.key value).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup.sh"
titan_setup titan >&2

MODULE="${MODULE:-llama3}"
CONFIG="${CONFIG:-${CONFIG_FILE:-llama3_debugmodel}}"
exec "$TITAN_ROOT/build/titan" launch --module "$MODULE" --config "$CONFIG" "$@"
