"""What the compiled dispatch of ``encode(text)`` saves on short texts: the same tokenizer called through its
Python method and through the instance's ``encode`` (``app/engine/_native/fast_call.h``), next to the reference.

``python -m bench.families.plain_call [--tokenizers a,b] [--rounds R] [--bytes N] [--data-dir DIR]``

Per tokenizer and round, in alternating order: one pass over the 50 B lines of ``bench.families.run`` (the first
``N`` bytes of the bench corpora as 10 KB documents, cut into 50-character lines) through the reference
(``sentencepiece`` for a ``.model``/GGUF SentencePiece tokenizer, Hugging Face ``tokenizers`` otherwise), through
``type(tok).encode`` (the method: what ``encode`` was before the dispatch) and through ``tok.encode``; also
``count``, both ways. This thread's CPU time, medians in MB/s; the ids are checked equal first. Run from the
repository root.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")

DEFAULT = "mistral-v3,llama2,xlm-roberta,bge-small-en-v1.5,cl100k_base,qwen3"


def _reference(name: str) -> Callable[[str], list[int]]:
    from app.engine import get_store

    spec = get_store().spec(name)
    if spec.format == "sentencepiece" or name in ("llama2", "phi-3", "xlm-roberta"):
        from tests.engine.families.references import sentencepiece_reference

        sp = sentencepiece_reference(name)
        return sp.encode  # type: ignore[no-any-return]
    if spec.format == "tiktoken":
        from tests.engine.exactness.reference import reference_encoding

        return reference_encoding(name).encode_ordinary  # type: ignore[no-any-return]
    from bench.families.run import _hf

    hf = _hf(name)
    return lambda text: hf.encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return]


def _pass(fn: Callable[[str], Any], texts: list[str]) -> float:
    t = time.thread_time()
    for x in texts:
        fn(x)
    return time.thread_time() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", default=DEFAULT)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--bytes", type=int, default=100_000)
    parser.add_argument("--data-dir", type=Path, default=None, help="the corpora (default: bench.corpora's)")
    args = parser.parse_args(argv)

    from app.engine import get_encoding
    from bench.families.run import _lines
    from bench.pipeline.run import _docs

    lines = _lines(_docs(args.bytes, args.data_dir))
    print(f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {len(lines)} lines, "
          f"{args.rounds} rounds; MB/s, this thread's CPU time, medians")
    print("| tokenizer | reference | encode, method | encode, dispatched | gain | count, method | count, dispatched "
          "| gain | dispatched encode / reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.tokenizers.split(","):
        tok = get_encoding(name)
        ref = _reference(name)
        skip = ("<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "<|endoftext|>")
        texts = [x for x in lines if not any(s in x for s in skip)]
        method, count_method = type(tok).encode.__get__(tok), type(tok).count.__get__(tok)
        for x in texts:
            if not (tok.encode(x) == method(x) == ref(x) and tok.count(x) == len(method(x))):
                raise SystemExit(f"{name}: ids differ on {x!r}; not timing")
        ways: dict[str, Callable[[str], Any]] = {"reference": ref, "method": method, "dispatched": tok.encode,
                                                 "count method": count_method, "count dispatched": tok.count}
        times: dict[str, list[float]] = {k: [] for k in ways}
        order = list(ways)
        for r in range(args.rounds):
            for k in order if r % 2 == 0 else order[::-1]:
                times[k].append(_pass(ways[k], texts))
        mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
        m = {k: mb / statistics.median(v) for k, v in times.items()}
        print(f"| {name} | {m['reference']:.1f} | {m['method']:.1f} | {m['dispatched']:.1f} | "
              f"{m['dispatched'] / m['method']:.2f}x | {m['count method']:.1f} | {m['count dispatched']:.1f} | "
              f"{m['count dispatched'] / m['count method']:.2f}x | {m['dispatched'] / m['reference']:.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
