"""Corpora for the WordPiece / Unigram / SentencePiece trainer tests: real text of this repository plus seeded
multilingual lines (scripts with and without spaces), and hostile strings for differential encoding."""

from __future__ import annotations

import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_WORDS = {
    "de": "Straße größer Übung Mädchen schön über Bäume fährt Fußgänger".split(),
    "fr": "élève café être où déjà garçon français noël hôpital".split(),
    "ru": "привет мир язык словарь токенизация пример строка".split(),
    "el": "καλημέρα κόσμος γλώσσα λεξικό παράδειγμα".split(),
}
_NO_SPACE = {
    "ja": "日本語の文章には単語の間に空白がありません東京大学で研究しています",
    "zh": "中文没有空格分词是一个重要的问题我们今天学习机器翻译",
    "th": "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำการตัดคำจึงสำคัญ",
}


def corpus_text(max_bytes: int = 200_000, seed: int = 12) -> str:
    """Deterministic training text: this repository's docs and engine sources (cut at ``max_bytes``), then
    400 seeded lines mixing the languages above, digits and punctuation."""
    parts: list[str] = []
    size = 0
    docs = sorted(REPO.glob("*.md")) + sorted((REPO / "docs").glob("*.md"))
    for f in docs + sorted((REPO / "app" / "engine").rglob("*.py")):
        text = f.read_text(encoding="utf-8")
        parts.append(text)
        size += len(text.encode("utf-8"))
        if size > max_bytes:
            break
    rng = random.Random(seed)
    for _ in range(400):
        lang = rng.choice([*_WORDS, *_NO_SPACE])
        if lang in _WORDS:
            line = " ".join(rng.choice(_WORDS[lang]) for _ in range(rng.randint(3, 12)))
        else:
            src = _NO_SPACE[lang]
            i = rng.randrange(len(src) - 8)
            line = src[i:i + rng.randint(6, 20)] + ("。" if lang != "th" else "")
        if rng.random() < 0.3:
            line += f" {rng.randint(0, 99999)} ({rng.choice('!?.,;:')})"
        parts.append(line + "\n")
    return "".join(parts)


def hostile_samples(text: str, n: int, seed: int = 5) -> list[str]:
    """``n`` strings: slices of ``text``, some upper-cased or with accents, CJK, controls, odd spaces and
    characters the corpus never had appended."""
    rng = random.Random(seed)
    extras = ["", " café ÉÀ", " 日本語テキスト", "\u200b\u00a0x", "\t\t  y  ", " 🙂👍🏽", " \x00\x07z", " ﬁ ｆｕｌｌ",
              "  leading", "trailing   ", " ##hash", " 1234567890", " \u0301\u0300"]
    out = []
    for _ in range(n):
        i = rng.randrange(len(text))
        s = text[i:i + rng.randint(0, 300)]
        if rng.random() < 0.3:
            s = s.upper()
        out.append(s + rng.choice(extras))
    return out
