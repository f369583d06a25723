"""Development runs of the differential comparison at scale (not collected by pytest).

``python -m tests.engine.pipeline.run_differential [NAMES] [COUNT] [SEED] [PARTS]`` — NAMES comma-separated
(default all bundled tokenizer.json tokenizers), COUNT seeded hostile mixes per tokenizer (default 20000), SEED,
PARTS a comma-separated subset of ``hostile,real,long``. Prints strings compared and mismatches per tokenizer.
"""

from __future__ import annotations

import sys
import time

from harness import realtext

from .corpus import hostile, long_strings
from .reference import HF_JSON, compare, ours


def main(argv: list[str]) -> int:
    names = argv[0].split(",") if argv else list(HF_JSON)
    count = int(argv[1]) if len(argv) > 1 else 20_000
    seed = int(argv[2]) if len(argv) > 2 else 1
    parts = argv[3].split(",") if len(argv) > 3 else ["hostile", "real", "long"]
    failed = 0
    for name in names:
        tok = ours(name)
        strings = [*tok.special_tokens, *tok.added_tokens]
        start = time.perf_counter()
        compared, mismatches = 0, []
        if "hostile" in parts:
            r = compare(name, hostile(strings, seed=seed, count=count, token_limit=400))
            compared, mismatches = compared + r.compared, mismatches + r.mismatches
        if "real" in parts:
            texts = [s for doc in realtext.documents() for s in realtext.strings(doc)]
            r = compare(name, texts, with_template=False)
            compared, mismatches = compared + r.compared, mismatches + r.mismatches
        if "long" in parts:
            r = compare(name, long_strings(100_000), with_template=False)
            compared, mismatches = compared + r.compared, mismatches + r.mismatches
        print(f"{name}: compared {compared} mismatches {len(mismatches)} in {time.perf_counter() - start:.0f}s",
              flush=True)
        for line in mismatches[:15]:
            print("  ", line)
        failed += bool(mismatches)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
