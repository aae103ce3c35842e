#!/usr/bin/env bash
# `npm run embeddings [-- PORT]`: the local all-MiniLM-L6-v2 embeddings service, for trying the
# knowledge retrieval's embeddings on a machine with no network. Installs its virtualenv on the
# first run (scripts/embeddings/setup.sh, cached outside the checkout), then serves
# POST http://127.0.0.1:PORT/v1/embeddings (PORT: the argument, else $MINILM_PORT, else 8081) and
# prints the two variables to give the worker, `npm run knowledge:sync` and `npm run eval`.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON_BIN="$(bash "$DIR/setup.sh")"
exec "$PYTHON_BIN" "$DIR/minilm.py" "$@"
