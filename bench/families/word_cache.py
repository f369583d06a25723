"""The compiled Unigram word cache (``$TOKENIZER_UNIGRAM_WORD_CACHE``) on xlm-roberta: on vs off in one process.

``python -m bench.families.word_cache [--bytes N] [--rounds R] [--slots S]``

The workloads of ``bench.families.run`` (10 KB documents and 50 B lines of :mod:`bench.corpora`). Two A/Bs,
this thread's CPU time, medians of ``R`` rounds with alternating order:

* cold, as ``bench.families.run`` times it: a Hugging Face pass (which sweeps the CPU caches), then one pass of
  each (the cache cleared first), then the same pass again ("warm": its second pass since the clear);
* steady state: the cache never cleared after three untimed passes, one pass of each.

Also ``sentencepiece`` in the cold rounds, for the ratio the issue's target is about. Run from the repository
root (it uses the test suite's reference builders).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")


def cpu_pass(encode: Callable[[str], object], texts: list[str]) -> float:
    """This thread's CPU seconds to call ``encode`` on every text once."""
    t = time.thread_time()
    for x in texts:
        encode(x)
    return time.thread_time() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--slots", type=int, default=16_384)
    args = parser.parse_args(argv)

    from app.engine.pipeline.models.unigram import WORD_CACHE_ENV
    from app.engine.registry import get_store, load_encoding
    from bench.families.run import _hf, _lines
    from bench.pipeline.run import _commit, _docs
    from harness.references import sentencepiece_reference

    spec = get_store().spec("xlm-roberta-sentencepiece")
    os.environ[WORD_CACHE_ENV] = str(args.slots)
    on = load_encoding(spec)
    del os.environ[WORD_CACHE_ENV]
    off = load_encoding(spec)
    assert on.cache_stats().max_size == args.slots and off.cache_stats().max_size == 0
    sp = sentencepiece_reference("xlm-roberta-sentencepiece")
    hf_tok = _hf("xlm-roberta-sentencepiece")
    assert hf_tok is not None
    docs = _docs(args.bytes)
    print(f"commit {_commit()}, load average at start {os.getloadavg()[0]:.2f}, {args.rounds} rounds, "
          f"{args.slots} slots")
    print("| workload | cold on | cold off | on/off | 2nd pass on | 2nd pass off | on/off | steady on | steady off "
          "| on/off | sentencepiece | cold on / sp | cold off / sp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, texts in (("10 KB docs", docs), ("50 B lines", _lines(docs))):
        if any(on.encode(x) != off.encode(x) or off.encode(x) != sp.encode(x) for x in texts):
            raise SystemExit(f"{name}: ids differ; not timing")
        mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
        t: dict[str, list[float]] = {k: [] for k in ("on", "off", "on2", "off2", "sp", "son", "soff")}
        for r in range(args.rounds):
            for which in ("on", "off", "sp") if r % 2 == 0 else ("sp", "off", "on"):
                for x in texts:
                    hf_tok.encode(x, add_special_tokens=False)
                if which == "sp":
                    t["sp"].append(cpu_pass(sp.encode, texts))
                    continue
                tok = on if which == "on" else off
                tok.clear_cache()
                t[which].append(cpu_pass(tok.encode, texts))
                t[which + "2"].append(cpu_pass(tok.encode, texts))
        for _ in range(3):
            cpu_pass(on.encode, texts)
        for r in range(args.rounds):
            for which in ("son", "soff") if r % 2 == 0 else ("soff", "son"):
                t[which].append(cpu_pass((on if which == "son" else off).encode, texts))
        m = {k: mb / statistics.median(v) for k, v in t.items()}
        print(f"| {name} | {m['on']:.1f} | {m['off']:.1f} | {m['on'] / m['off']:.2f}x | {m['on2']:.1f} | "
              f"{m['off2']:.1f} | {m['on2'] / m['off2']:.2f}x | {m['son']:.1f} | {m['soff']:.1f} | "
              f"{m['son'] / m['soff']:.2f}x | {m['sp']:.1f} | {m['on'] / m['sp']:.2f}x | {m['off'] / m['sp']:.2f}x |")
    print(f"MB/s of UTF-8 input; load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
