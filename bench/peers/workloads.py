"""The peer benchmark's two workloads, cut from :mod:`bench.corpora`'s benchmark texts.

* **documents**: 10 KB (10,000 UTF-8 bytes, cut back to a character boundary) from the start of each corpus
  (English prose, source code, each multilingual script), ``per_corpus`` of them per corpus;
* **lines**: chat-sized strings of 50–200 UTF-8 bytes (lengths drawn with a fixed seed), cut from the second half
  of each corpus (text the documents do not contain), corpora taken in turn.

Texts holding a special-token string of any bundled tokenizer (:data:`SPECIAL_MARKERS`) are left out: what is
compared and timed is plain-text encoding, and some peers match such strings inside text.
"""

from __future__ import annotations

import random
from pathlib import Path

DOC_BYTES = 10_000
LINE_MIN_BYTES, LINE_MAX_BYTES = 50, 200
SPECIAL_MARKERS = ("<s>", "</s>", "<unk>", "<pad>", "<bos>", "<eos>", "<mask>", "[CLS]", "[SEP]", "[UNK]", "[PAD]",
                   "[MASK]", "[INST]", "[/INST]", "<|", "|>", "<start_of", "<end_of", "<\uff5c")


def _cut(raw: bytes, start: int, size: int) -> str:
    """``size`` bytes of ``raw`` from ``start``, decoded; a character cut at either end is dropped."""
    return raw[start:start + size].decode("utf-8", "ignore")


def _plain(text: str) -> bool:
    return bool(text) and not any(m in text for m in SPECIAL_MARKERS)


def corpora_texts(data_dir: Path | None = None, max_corpora: int | None = None) -> dict[str, bytes]:
    """The benchmark corpora (``english``, ``code``, ``ml-<lang>``) as UTF-8, the first ``max_corpora`` of them."""
    from bench.corpora import bench_texts

    texts = bench_texts(data_dir)
    names = list(texts)[:max_corpora]
    return {n: texts[n].encode("utf-8") for n in names}


def documents(texts: dict[str, bytes], per_corpus: int) -> list[str]:
    """``per_corpus`` consecutive 10 KB documents from the start of each corpus (fewer if it is short)."""
    out: list[str] = []
    for raw in texts.values():
        half = len(raw) // 2
        for k in range(per_corpus):
            if (k + 1) * DOC_BYTES > half:
                break
            doc = _cut(raw, k * DOC_BYTES, DOC_BYTES)
            if _plain(doc):
                out.append(doc)
    return out


def lines(texts: dict[str, bytes], count: int, seed: int = 28) -> list[str]:
    """``count`` strings of 50–200 bytes from the second halves of the corpora, round-robin, seeded lengths."""
    rng = random.Random(seed)
    cursors = {n: len(raw) // 2 for n, raw in texts.items()}
    out: list[str] = []
    names = list(texts)
    idle = 0
    while len(out) < count and idle < len(names):
        idle = 0
        for n in names:
            if len(out) >= count:
                break
            raw, at = texts[n], cursors[n]
            size = rng.randint(LINE_MIN_BYTES, LINE_MAX_BYTES)
            if at + size > len(raw):
                idle += 1
                continue
            cursors[n] = at + size
            piece = _cut(raw, at, size)
            if _plain(piece) and len(piece.encode("utf-8")) >= LINE_MIN_BYTES:
                out.append(piece)
    return out
