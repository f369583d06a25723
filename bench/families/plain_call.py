"""What the compiled dispatch of ``encode(text)`` saves on short texts: the same tokenizer called through its
Python method and through the instance's ``encode`` (``app/engine/_native/fast_call.h``), next to the reference.

``python -m bench.families.plain_call [--tokenizers a,b] [--rounds R] [--bytes N] [--data-dir DIR]``

Per tokenizer and round, in alternating order: a pass of the reference, then two passes of one of ours ("cold":
right after the reference, which sweeps the caches and the branch predictor's memory of the text; "warm": right
after itself), for each of ``type(tok).encode`` (the method: what ``encode`` was before the dispatch),
``tok.encode``, and ``count`` both ways. A pass is the 50 B lines of ``bench.families.run`` (the first ``N`` bytes
of the bench corpora as 10 KB documents, cut into 50-character lines). The reference is
``sentencepiece`` for a ``.model``/GGUF SentencePiece tokenizer, tiktoken's ``encode_ordinary`` for a tiktoken
file, Hugging Face ``tokenizers`` otherwise. This thread's CPU time, medians in MB/s; the ids are checked equal
first. Run from the repository root.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.families.word_cache import cpu_pass

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")

DEFAULT = "mistral-v3,llama2,xlm-roberta,bge-small-en-v1.5,cl100k_base,qwen3"


def _reference(name: str) -> Callable[[str], list[int]]:
    """The reference ``bench.families.run`` times for ``name`` (``sentencepiece``, else Hugging Face, else
    ``mistral-common``); tiktoken's ``encode_ordinary`` for a tiktoken file, Hugging Face ``tokenizers`` on the
    store's own file for a ``tokenizer.json``."""
    from app.engine import get_store
    from bench.families.run import references

    refs = references(name)
    for lib in ("sentencepiece", "hf", "mistral-common"):
        if lib in refs:
            return refs[lib]
    if get_store().spec(name).format == "tiktoken":
        from harness.references import reference_encoding

        return reference_encoding(name).encode_ordinary  # type: ignore[no-any-return]
    from harness.references import hf_json_reference as reference

    hf = reference(name)
    return lambda text: hf.encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", default=DEFAULT)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--bytes", type=int, default=100_000)
    parser.add_argument("--data-dir", type=Path, default=None, help="the corpora (default: bench.corpora's)")
    args = parser.parse_args(argv)

    from app.engine import get_tokenizer
    from bench.families.run import _lines
    from bench.pipeline.run import _docs

    lines = _lines(_docs(args.bytes, args.data_dir))
    print(f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {len(lines)} lines, "
          f"{args.rounds} rounds; MB/s, this thread's CPU time, medians")
    print("| tokenizer | reference | encode, method (cold / warm) | encode, dispatched | warm gain | ns saved a call "
          "(warm) | count, method | count, dispatched | dispatched encode cold / reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.tokenizers.split(","):
        tok = get_tokenizer(name)
        ref = _reference(name)
        skip = ("<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "<|endoftext|>")
        texts = [x for x in lines if not any(s in x for s in skip)]
        method, count_method = type(tok).encode.__get__(tok), type(tok).count.__get__(tok)
        for x in texts:
            if not (tok.encode(x) == method(x) == ref(x) and tok.count(x) == len(method(x))):
                raise SystemExit(f"{name}: ids differ on {x!r}; not timing")
        ways: dict[str, Callable[[str], Any]] = {"method": method, "dispatched": tok.encode,
                                                 "count method": count_method, "count dispatched": tok.count}
        cold: dict[str, list[float]] = {k: [] for k in ways}
        warm: dict[str, list[float]] = {k: [] for k in ways}
        reference: list[float] = []
        for r in range(args.rounds):
            for k in ways if r % 2 == 0 else list(ways)[::-1]:
                reference.append(cpu_pass(ref, texts))
                cold[k].append(cpu_pass(ways[k], texts))  # right after the reference
                warm[k].append(cpu_pass(ways[k], texts))  # right after itself
        mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
        c = {k: mb / statistics.median(v) for k, v in cold.items()}
        w = {k: mb / statistics.median(v) for k, v in warm.items()}
        saved = (statistics.median(warm["method"]) - statistics.median(warm["dispatched"])) / len(texts) * 1e9
        print(f"| {name} | {mb / statistics.median(reference):.1f} | {c['method']:.1f} / {w['method']:.1f} | "
              f"{c['dispatched']:.1f} / {w['dispatched']:.1f} | {w['dispatched'] / w['method']:.2f}x | {saved:.0f} | "
              f"{c['count method']:.1f} / {w['count method']:.1f} | {c['count dispatched']:.1f} / "
              f"{w['count dispatched']:.1f} | {c['dispatched'] / mb * statistics.median(reference):.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
