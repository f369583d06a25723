"""What pricing adds to ``/count``: ``{"model": "gpt-4o", ...}`` (count + the priced ``model`` block) against
``{"tokenizer": "o200k_base", ...}`` (the same count, no block), called through the ASGI interface one request at a
time, for a ~200 B and a ~4 KB text (issue 26 asks for at most 1.1x).

    python -m bench.service.price_overhead [--requests 2000] [--rounds 7] [--clock wall|cpu]
    python -m bench.service.price_overhead --pairs 200 [--batch 100] [--clock wall|cpu]

Prints microseconds per request (median over interleaved rounds) and the ratio per size. ``--clock cpu`` times the
process's CPU (``time.process_time``: every thread of the process, not the time it waits for a core), which is the
steadier measure on a loaded machine. ``--pairs``: finer interleaving for a noisy machine: ``--batch`` requests of
one body, then as many of the other (alternating which goes first), ``--pairs`` times per size; prints the median
and quartiles of the per-pair ratios, so a slow drift of the machine's speed cancels within each pair.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from bench.service.asgi_overhead import call

SENTENCE = "The quick brown fox jumps over the lazy dog. "
TEXTS = {"200 B": SENTENCE * 4 + "Pack my box.", "4 KB": SENTENCE * 91}


def bodies() -> dict[tuple[str, str], bytes]:
    """(size, variant) -> request body."""
    out = {}
    for size, text in TEXTS.items():
        out[(size, "tokenizer")] = json.dumps({"tokenizer": "o200k_base", "text": text}).encode()
        out[(size, "model")] = json.dumps({"model": "gpt-4o", "text": text, "max_output_tokens": 100}).encode()
    return out


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


async def measure(requests: int, rounds: int, clock: str = "wall") -> dict[tuple[str, str], float]:
    """Median microseconds per request of every (size, variant), on the ``clock`` of :data:`CLOCKS`."""
    now = CLOCKS[clock]
    from app.api.main import create_app
    from app.core.config import Settings

    app = create_app(Settings(log_level="warning", tokenizers="o200k_base"))
    timings: dict[tuple[str, str], list[float]] = {}
    cases = bodies()
    async with app.router.lifespan_context(app):
        for body in cases.values():  # warm up every path (caches, first quote of a price set)
            for _ in range(50):
                await call(app, "/count", body)
        for r in range(rounds):
            order = list(cases) if r % 2 == 0 else list(reversed(cases))
            for key in order:
                body = cases[key]
                start = now()
                for _ in range(requests):
                    await call(app, "/count", body)
                timings.setdefault(key, []).append((now() - start) / requests * 1e6)
    return {k: statistics.median(v) for k, v in timings.items()}


async def measure_pairs(batch: int, pairs: int, clock: str = "wall") -> dict[str, list[float]]:
    """Per size, the ratios (model / tokenizer) of ``pairs`` adjacent batches of ``batch`` requests each."""
    now = CLOCKS[clock]
    from app.api.main import create_app
    from app.core.config import Settings

    app = create_app(Settings(log_level="warning", tokenizers="o200k_base"))
    cases = bodies()
    out: dict[str, list[float]] = {}
    async with app.router.lifespan_context(app):
        for body in cases.values():
            for _ in range(200):
                await call(app, "/count", body)
        for size in TEXTS:
            plain, priced = cases[(size, "tokenizer")], cases[(size, "model")]
            for p in range(pairs):
                took = {}
                for body in ((plain, priced) if p % 2 == 0 else (priced, plain)):
                    start = now()
                    for _ in range(batch):
                        await call(app, "/count", body)
                    took[body] = now() - start
                out.setdefault(size, []).append(took[priced] / took[plain])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--pairs", type=int, default=0, help="alternating batches instead of rounds (see above)")
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    if args.pairs:
        for size, ratios in asyncio.run(measure_pairs(args.batch, args.pairs, args.clock)).items():
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(f"{size:>5}: /count model / tokenizer, median of {len(ratios)} pairs of {args.batch} requests: "
                  f"{statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})")
        return
    result = asyncio.run(measure(args.requests, args.rounds, args.clock))
    for size in TEXTS:
        plain, priced = result[(size, "tokenizer")], result[(size, "model")]
        print(f"{size:>5}: /count tokenizer {plain:7.1f} us   /count model {priced:7.1f} us   "
              f"ratio {priced / plain:.3f}")


if __name__ == "__main__":
    main()
