"""Two or more builds of the compiled Unigram core (``_unigram*.so``) on xlm-roberta in one process, interleaved.

``python -m bench.families.unigram_builds DIR [DIR ...] [--rounds R] [--bytes N]``

Each ``DIR`` holds a built ``_unigram*.so`` (for instance a copy of ``app/engine/_native/`` from another commit);
each build gets its own xlm-roberta pipeline, whose ids are first checked equal to ``sentencepiece`` on every
text. The workloads of ``bench.families.run`` (10 KB documents and 50 B lines of :mod:`bench.corpora`); per round
and build, in alternating order, this thread's CPU time of one pass right after a ``sentencepiece`` pass, one
right after a Hugging Face pass (both sweep the CPU caches and the branch predictor's memory of this text: the
"cold" passes), and one right after it ("warm"); also ``sentencepiece`` right after each build's pass and right
after Hugging Face. Medians in MB/s. Builds compared in one process see the same machine state, which separate
runs of ``bench.families.run`` on a shared machine do not. Run from the repository root.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.families.word_cache import cpu_pass

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("BENCH_CORPORA_OFFLINE", "1")


def _load_build(directory: Path) -> ModuleType:
    """The ``_unigram`` extension module built in ``directory`` (a separate copy per path)."""
    found = glob.glob(str(directory / "_unigram*.so"))
    if not found:
        raise SystemExit(f"no _unigram*.so in {directory}")
    spec = importlib.util.spec_from_file_location("_unigram", found[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path, help="directories holding a built _unigram*.so")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--bytes", type=int, default=100_000)
    args = parser.parse_args(argv)

    from app.engine.pipeline.compiled import UNIGRAM
    from app.engine.registry import get_store, load_encoding
    from bench.families.run import _hf, _lines
    from bench.pipeline.run import _docs
    from harness.references import sentencepiece_reference

    spec = get_store().spec("xlm-roberta-sentencepiece")
    builds: list[Any] = []
    for d in args.dirs:
        UNIGRAM.module = _load_build(d)  # the pipeline built next compiles its model and normalizer with it
        builds.append(load_encoding(spec))
    sp = sentencepiece_reference("xlm-roberta-sentencepiece")
    hf_tok = _hf("xlm-roberta-sentencepiece")
    assert hf_tok is not None

    def hf(text: str) -> object:
        return hf_tok.encode(text, add_special_tokens=False)

    docs = _docs(args.bytes)
    print(f"load average at start {os.getloadavg()[0]:.2f}, {args.rounds} rounds; MB/s, this thread's CPU time")
    print("| workload | build | after sp | after HF | warm | sp after this build | sp after HF | "
          "after sp / sp after build | after HF / sp after HF |")
    print("|---|---|---|---|---|---|---|---|---|")
    for wname, texts in (("10 KB docs", docs), ("50 B lines", _lines(docs))):
        for x in texts:
            expected = sp.encode(x)
            for b in builds:
                assert b.encode(x) == expected, (wname, x[:60])
        times: dict[tuple[int | str, str], list[float]] = {}
        order = list(range(len(builds)))
        for r in range(args.rounds):
            for i in order if r % 2 == 0 else order[::-1]:
                for sweeper, after in ((sp.encode, "after sp"), (hf, "after HF")):
                    cpu_pass(sweeper, texts)
                    times.setdefault((i, after), []).append(cpu_pass(builds[i].encode, texts))
                    times.setdefault((i, "warm"), []).append(cpu_pass(builds[i].encode, texts))
                times.setdefault(("sp", f"after build {i}"), []).append(cpu_pass(sp.encode, texts))
            cpu_pass(hf, texts)
            times.setdefault(("sp", "after HF"), []).append(cpu_pass(sp.encode, texts))
        mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
        rate = {k: mb / statistics.median(v) for k, v in times.items()}
        for i, d in enumerate(args.dirs):
            sp_b, sp_hf = rate[("sp", f"after build {i}")], rate[("sp", "after HF")]
            print(f"| {wname} | {d} | {rate[(i, 'after sp')]:.1f} | {rate[(i, 'after HF')]:.1f} | "
                  f"{rate[(i, 'warm')]:.1f} | {sp_b:.1f} | {sp_hf:.1f} | {rate[(i, 'after sp')] / sp_b:.2f}x | "
                  f"{rate[(i, 'after HF')] / sp_hf:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
