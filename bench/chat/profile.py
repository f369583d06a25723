"""Where a Jinja chat count spends its time, step by step, on the conversations of :mod:`bench.chat.run`.

    python -m bench.chat.profile                       # Llama 3.1, Qwen3, Gemma 3
    python -m bench.chat.profile --models qwen3-8b --runs 31

Each step runs alone over the 200 conversations (warm, medians of ``--runs`` CPU times, ms); the prompt is counted
from fresh copies (as a request's strings are) so that its UTF-8 form is not cached. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.engine import get_store, get_tokenizer
from app.engine.chat import ChatFramings, parse_conversation
from bench.chat.run import MODELS, build

JINJA = ["llama-3.1-8b-instruct", "qwen3-8b", "gemma-3-27b-it"]


def cpu_ms(fn: Callable[[], Any], runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def fresh(text: str) -> str:
    return (text + ".")[:-1]


def profile(tokenizer: str, spec: dict[str, Any], convs: list[list[dict[str, Any]]], framings: ChatFramings,
            r: int) -> dict[str, float]:
    enc: Any = get_tokenizer(tokenizer)
    framing: Any = framings.framing(spec, enc)
    tpl = framing.template
    parsed = [parse_conversation(m) for m in convs]
    prompts = [tpl.render_for_count(c) for c in parsed]
    own = tpl.own_specials
    return {
        "validate (`parse_conversation`)": cpu_ms(lambda: [parse_conversation(m) for m in convs], r),
        "escaping probe": cpu_ms(lambda: [tpl._escaper.needed(c) for c in parsed], r),
        "shape memo: key, observations, slots": cpu_ms(lambda: [tpl.shapes.render(c, True) for c in parsed], r),
        "(without the memo: context + sandboxed render)": cpu_ms(
            lambda: [tpl._render(tpl.context(c, True, True)) for c in parsed], r),
        "`count_framed` of the prompt": cpu_ms(lambda: [enc.count_framed(fresh(p), own) for p in prompts], r),
        "whole chat count": cpu_ms(lambda: sum(framing.count(enc, parse_conversation(m)) for m in convs), r),
        "baseline: count the joined texts": cpu_ms(
            lambda: sum(enc.count("\n".join(x["content"] for x in m)) for m in convs), r),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--models", default=",".join(JINJA))
    args = ap.parse_args()
    convs = build(200)
    framings = ChatFramings.from_store(get_store().directory)
    wanted = args.models.split(",")
    rows = {model: profile(tokenizer, spec, convs, framings, args.runs) for model, tokenizer, spec in MODELS
            if model in wanted}
    print(f"load average {os.getloadavg()[0]:.2f}; CPU ms per 200 conversations, medians of {args.runs}")
    print("| step | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for step in next(iter(rows.values())):
        print(f"| {step} | " + " | ".join(f"{rows[m][step]:.2f}" for m in rows) + " |")


if __name__ == "__main__":
    main()
