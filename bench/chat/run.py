"""Chat counting cost: counting a conversation through its model's framing vs counting the concatenated message
texts with the same tokenizer (target: at most 1.5x).

    python -m bench.chat.run                  # 5 interleaved runs, 200 conversations per model
    python -m bench.chat.run --runs 3 --conversations 50
    python -m bench.chat.run --no-shape-memo  # Jinja rows render every conversation's template

Conversations: a system prompt and 3-8 alternating user/assistant messages drawn (fixed seed) from the ``chat``
corpus (messages of 100 B - 2 KiB, log-uniform; median about 660 B). Each timing covers validation
(``parse_conversation``) and framing + counting; the baseline counts ``"\\n".join(texts)``. Both run warm (one
untimed pass first: Jinja templates then also hold the shapes of these conversations in their shape memo, as a
running service does after its first requests; ``--no-shape-memo`` shows the cost without it), one thread.
Prints a Markdown table: median wall times, their ratio, and the ratio of median CPU times (steadier on a shared
machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import time
from typing import Any

from app.engine import get_store, get_tokenizer
from app.engine.chat import ChatFramings, parse_conversation
from bench.corpora import ensure

MODELS = [("gpt-4o", "o200k_base", {"framing": "openai-cookbook", "rules": "gpt-4o"}),
          ("gpt-oss-20b", "o200k_harmony", {"framing": "harmony"}),
          ("llama-3.1-8b-instruct", "llama3", {"framing": "jinja", "template": "llama-3.1-8b-instruct"}),
          ("qwen3-8b", "qwen3", {"framing": "jinja", "template": "qwen3-8b"}),
          ("gemma-3-27b-it", "gemma3", {"framing": "jinja", "template": "gemma-3-27b-it"}),
          ("mistral-nemo-instruct-2407", "mistral-nemo", {"framing": "mistral", "version": "v3"}),
          ("mistral-large-2411", "mistral-v7", {"framing": "mistral", "version": "v7"})]


def build(n: int, seed: int = 0) -> list[list[dict[str, Any]]]:
    texts = json.loads(ensure("chat").read_text(encoding="utf-8"))
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        msgs = [{"role": "system", "content": rng.choice(texts)}]
        for i in range(rng.randint(3, 8)):
            msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": rng.choice(texts)})
        if msgs[-1]["role"] != "user":
            msgs.append({"role": "user", "content": rng.choice(texts)})
        out.append(msgs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--models", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--no-shape-memo", action="store_true",
                    help="render every conversation's template (Jinja rows), without the shape memo")
    args = ap.parse_args()
    convs = build(args.conversations)
    framings = ChatFramings.from_store(get_store().directory)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    memo = "off" if args.no_shape_memo else "on"
    print(f"commit {commit}, {platform.python_version()}, {len(convs)} conversations, {args.runs} runs, "
          f"shape memo {memo}, load average {os.getloadavg()[0]:.2f}")
    print("| model | framing | chat count (ms, median) | concatenated texts (ms, median) | ratio | CPU-time ratio |")
    print("|---|---|---|---|---|---|")
    wanted = set(filter(None, args.models.split(",")))
    for model, tokenizer, spec in MODELS:
        if wanted and model not in wanted:
            continue
        enc = get_tokenizer(tokenizer)
        framing = framings.framing(spec, enc)
        if args.no_shape_memo and hasattr(framing, "template"):
            framing.template.shapes.disable()

        def chat(enc: Any = enc, framing: Any = framing) -> int:
            return sum(framing.count(enc, parse_conversation(m)) for m in convs)

        def plain(enc: Any = enc) -> int:
            return sum(enc.count("\n".join(x["content"] for x in m)) for m in convs)

        chat(), plain()  # warm: caches, compiled template
        t_chat, t_plain, cpu_chat, cpu_plain = [], [], [], []
        for _ in range(args.runs):  # interleaved
            for fn, wall, cpu in ((chat, t_chat, cpu_chat), (plain, t_plain, cpu_plain)):
                start, start_cpu = time.perf_counter(), time.process_time()
                fn()
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
        c, p = statistics.median(t_chat) * 1000, statistics.median(t_plain) * 1000
        cc, cp = statistics.median(cpu_chat) * 1000, statistics.median(cpu_plain) * 1000
        print(f"| {model} | {framing.kind} | {c:.1f} | {p:.1f} | {c / p:.2f}x | {cc / cp:.2f}x |")


if __name__ == "__main__":
    main()
