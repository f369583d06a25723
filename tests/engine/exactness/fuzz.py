"""The grammar fuzz campaign (not collected by pytest): seeded strings from :mod:`.grammar` through every byte-level
BPE tokenizer (tiktoken files, against tiktoken's ``encode_ordinary``) and every tokenizer.json tokenizer (against
Hugging Face ``tokenizers`` with special-token matching off), on the compiled and the pure-Python backends.

    python -m tests.engine.exactness.fuzz [--names a,b] [--seconds S] [--seed N] [--batch B] [--cache-size C]
                                          [--report FILE]

Strings come in batches; every target sees every batch (the same strings), until ``--seconds`` have passed. Ids
and ``count`` are compared. About 5 % of the strings hold lone surrogates: tiktoken scrubs them to U+FFFD itself,
Hugging Face refuses them (``TypeError``), so for it the reference is its encoding of the scrubbed text (our
documented rule, :func:`app.engine.encoding.scrub_surrogates`). A mismatch is shrunk to a minimal repro (delta
debugging over characters) and printed with both id lists. Exit status 1 if anything differed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine import get_store, get_tokenizer
from app.engine.encoding import scrub_surrogates

from ..shrinking import shrink
from . import grammar

Encode = Callable[[str], list[int]]

TIKTOKEN_NAMES = ("gpt2", "p50k_base", "cl100k_base", "o200k_base", "o200k_harmony", "llama3")
HF_JSON_NAMES = ("gemma3", "qwen3", "deepseek-v3")
NAMES = TIKTOKEN_NAMES + HF_JSON_NAMES
BACKENDS = ("native", "python")
SURROGATE_SHARE = 0.05


def reference_encoder(name: str) -> Encode:
    """The reference's ids for ``name``: tiktoken ``encode_ordinary`` or Hugging Face ``encode`` (no template)."""
    if get_store().spec(name).format == "hf_json":
        from tests.engine.pipeline.reference import reference

        hf = reference(name)

        def encode_hf(text: str) -> list[int]:
            ids: list[int] = hf.encode(scrub_surrogates(text), add_special_tokens=False).ids
            return ids

        return encode_hf
    from .reference import reference_encoding

    return reference_encoding(name).encode_ordinary


def ours_encoder(name: str, backend: str, cache_size: int | None = None) -> tuple[Encode, Callable[[str], int]]:
    """Our ``encode`` and ``count`` for ``name`` on ``backend`` (raises if the backend is not the one asked);
    ``cache_size`` as :func:`app.engine.get_tokenizer` takes it (None: the default pre-token cache)."""
    tok = get_tokenizer(name, backend=backend, cache_size=cache_size)
    if getattr(tok, "backend", backend) != backend:
        raise RuntimeError(f"asked for the {backend} backend of {name}, got {getattr(tok, 'backend', None)}")
    return tok.encode, tok.count


def differs(ours: Encode, count: Callable[[str], int], ref: Encode, text: str) -> bool:
    """True if ids or the count differ (an exception on our side counts as a difference)."""
    try:
        got = ours(text)
        n = count(text)
    except Exception:  # noqa: BLE001 -- a crash is a finding, shrunk like a mismatch
        return True
    want = ref(text)
    return got != want or n != len(want)


@dataclass
class Finding:
    """One mismatch: the target, the original string, its minimal repro and both sides' ids on the repro."""

    target: str
    original: str
    repro: str
    ours: list[int] | str
    reference: list[int]


@dataclass
class Campaign:
    seed: int
    compared: dict[str, int] = field(default_factory=dict)
    surrogate_strings: dict[str, int] = field(default_factory=dict)
    chars: dict[str, int] = field(default_factory=dict)
    mismatched: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    batches: int = 0


def batch(rng: random.Random, size: int) -> list[str]:
    return [grammar.surrogate_text(rng) if rng.random() < SURROGATE_SHARE else grammar.text(rng) for _ in range(size)]


def run(names: list[str], seconds: float, seed: int, batch_size: int, *, max_findings: int = 20,
        cache_size: int | None = None) -> Campaign:
    """Fuzz every (name, backend) on the same batches until ``seconds`` have passed."""
    refs = {n: reference_encoder(n) for n in names}
    targets = {(n, b): ours_encoder(n, b, cache_size) for n in names for b in BACKENDS}
    camp = Campaign(seed)
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    seen: set[tuple[str, str]] = set()
    while time.monotonic() < deadline:
        texts = batch(rng, batch_size)
        camp.batches += 1
        for name in names:
            ref = refs[name]
            wants = [ref(t) for t in texts]
            for backend in BACKENDS:
                encode, count = targets[name, backend]
                key = f"{name}/{backend}"
                for t, want in zip(texts, wants, strict=True):
                    try:
                        got: list[int] | str = encode(t)
                        bad = got != want or count(t) != len(want)
                    except Exception as exc:  # noqa: BLE001 -- a crash is a finding
                        got, bad = f"{type(exc).__name__}: {exc}", True
                    if bad:
                        camp.mismatched[key] = camp.mismatched.get(key, 0) + 1
                    if bad and len(camp.findings) < max_findings:
                        repro = shrink(t, lambda s, e=encode, c=count, r=ref: differs(e, c, r, s))
                        if (key, repro) not in seen:
                            seen.add((key, repro))
                            try:
                                mine: list[int] | str = encode(repro)
                            except Exception as exc:  # noqa: BLE001
                                mine = f"{type(exc).__name__}: {exc}"
                            finding = Finding(key, t, repro, mine, ref(repro))
                            camp.findings.append(finding)
                            print(f"MISMATCH {key}: repro {repro!r}\n  ours      {finding.ours}\n"
                                  f"  reference {finding.reference}\n  from {t[:200]!r}", flush=True)
                camp.compared[key] = camp.compared.get(key, 0) + len(texts)
                camp.chars[key] = camp.chars.get(key, 0) + sum(map(len, texts))
                camp.surrogate_strings[key] = camp.surrogate_strings.get(key, 0) + sum(
                    scrub_surrogates(t) != t for t in texts)
    return camp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--names", default=",".join(NAMES))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--cache-size", type=int, default=None, help="our pre-token cache size (0: off)")
    parser.add_argument("--report", default="", help="write the tally and findings to this JSON file")
    args = parser.parse_args(argv)
    names = [n for n in args.names.split(",") if n]
    t0 = time.monotonic()
    camp = run(names, args.seconds, args.seed, args.batch, cache_size=args.cache_size)
    elapsed = time.monotonic() - t0
    for key in sorted(camp.compared):
        bad = camp.mismatched.get(key, 0)
        print(f"{key:22s} strings {camp.compared[key]:>8,d}  chars {camp.chars[key]:>11,d}  "
              f"with surrogates {camp.surrogate_strings[key]:>6,d}  mismatches {bad}")
    print(f"seed {args.seed}, cache size {args.cache_size}, {camp.batches} batches of {args.batch}, {elapsed:.0f} s, "
          f"{len(camp.findings)} findings")
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            json.dump({"seed": args.seed, "cache_size": args.cache_size, "seconds": elapsed, "batches": camp.batches,
                       "batch": args.batch,
                       "compared": camp.compared, "mismatched": camp.mismatched, "chars": camp.chars,
                       "surrogate_strings": camp.surrogate_strings, "findings": [f.__dict__ for f in camp.findings]},
                      fh, ensure_ascii=False, indent=1)
    return 1 if camp.mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
