"""WordPiece training: merge the adjacent pair with the highest ``count(ab) / (count(a) * count(b))``.

Words come from BERT-style preparation — the engine's own ``BertNormalizer`` (clean text, optional lowercase,
accent stripping, spaces around CJK characters) and ``BertPreTokenizer`` (split on whitespace and around
punctuation), the components the served ``tokenizer.json`` uses, so training sees exactly the words encoding
will. A word starts as its first character followed by ``##``-prefixed continuation characters; merging ``a``
with ``b`` gives ``a`` + ``b`` without its ``##``.

Scores: ``count(x)`` is the number of occurrences of symbol ``x`` in the current segmentation of the corpus
(word frequencies included), ``count(ab)`` that of the adjacent pair. The best pair is the highest score; ties
go to the higher pair count, then to the smaller ``(left, right)`` by code point. Merging changes the counts of
``a`` and ``b``, which changes the score of *every* pair that contains one of them, not only pairs in the
rewritten words; the learner therefore indexes the pairs of each symbol and re-scores exactly those
(plus the pairs the rewrite touched), with a versioned max-heap (stale entries are skipped when they surface).
Nothing is ever recounted from scratch.

``score="count"`` (an option; the seed's score stays the default) ranks pairs by their raw count instead, ties as
above — what Hugging Face's ``WordPieceTrainer`` does (it is its BPE trainer with ``##`` continuations). On
mixed-script corpora the seed's score favours pairs of rare symbols and fills the vocabulary with fragments of
rare words; the raw count compresses held-out text far better (see ``bench/train/FAMILIES.md``).

Vocabulary (= ids): the special tokens in the order given (default ``[PAD] [UNK] [CLS] [SEP] [MASK]``), the
alphabet (every initial and ``##`` continuation character seen, sorted by code point), then one id per new
piece in merge order. Training stops at ``vocab_size`` ids, or when the best pair occurs fewer than
``min_frequency`` times. Words longer than ``max_input_chars_per_word`` characters are skipped (encoding maps
them to ``[UNK]`` whole).
"""

from __future__ import annotations

import heapq
import json
import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from ..pipeline.bert import WHITESPACE, BertNormalizer, is_punctuation, needs_whole_text
from .compiled import resolve_backend, trainer_module
from .trainer import Progress, TrainedArtifact

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: How pairs are ranked: the seed's ``count(ab) / (count(a) * count(b))``, or the raw pair count.
SCORES = ("wordpiece", "count")
PREFIX = "##"
#: Characters every BERT normalizer turns into a plain space (clean_text) and the pre-tokenizer splits on; a
#: chunk between them is normalized and split on its own, once per distinct chunk.
_CHUNK = re.compile(r"[^ \t\n\r]+")
#: Characters of fed text split at once (then cut at the next line end).
_PIECE = 1 << 16


class WordPieceTrainer:
    """Streaming WordPiece trainer (:class:`~.trainer.Trainer`); see the module docstring."""

    def __init__(self, *, vocab_size: int, min_frequency: int = 2, lowercase: bool = True,
                 strip_accents: bool | None = None, split_cjk: bool = True, clean_text: bool = True,
                 special_tokens: Sequence[str] = BERT_SPECIALS, unk_token: str = "[UNK]",
                 max_input_chars_per_word: int = 100, vocab_txt: bool = False, score: str = "wordpiece",
                 backend: str | None = None) -> None:
        """``strip_accents=None`` follows ``lowercase`` (as BERT does). ``unk_token`` must be one of
        ``special_tokens``; a post-processor ``[CLS] $A [SEP]`` is written when both exist. ``vocab_txt`` also
        writes a BERT ``vocab.txt`` (one token per line, in id order). ``score``: one of :data:`SCORES`; ``backend``:
        see :func:`learn_wordpiece`."""
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, not {score!r}")
        if min_frequency < 1:
            raise ValueError("min frequency must be >= 1")
        if len(set(special_tokens)) != len(special_tokens) or any(not s for s in special_tokens):
            raise ValueError("special tokens must be distinct non-empty strings")
        if unk_token not in special_tokens:
            raise ValueError(f"the unknown token {unk_token!r} must be one of the special tokens")
        self.vocab_size = vocab_size
        self.min_frequency = min_frequency
        self.specials = list(special_tokens)
        self.unk_token = unk_token
        self.max_chars = max_input_chars_per_word
        self.vocab_txt = vocab_txt
        self.score = score
        self.backend = backend
        self.normalizer = BertNormalizer(clean_text=clean_text, handle_chinese_chars=split_cjk,
                                         strip_accents=strip_accents, lowercase=lowercase)
        self._chunks: Counter[str] = Counter()

    def feed(self, text: str) -> None:
        # pieces of about 64K characters cut at a line end: the list of one piece's chunks stays small
        count, find, start = self._chunks.update, _CHUNK.findall, 0
        while start < len(text):
            end = text.find("\n", start + _PIECE) + 1 or len(text)
            count(find(text, start, end))
            start = end

    def words(self) -> dict[str, int]:
        """Word frequencies after normalization and pre-tokenization, in order of first appearance.

        Both steps are per character, so they run as one ``str.translate`` table and one regex built for the
        characters the normalized chunks hold — those of the table's values (the same words as ``normalize_str``
        and ``BertPreTokenizer``; tested). The exception: with accents stripped, a chunk holding a character that
        canonical reordering can move past its neighbour (:func:`~..pipeline.bert.needs_whole_text`) is
        normalized whole, as encoding does."""
        chars = set("".join(self._chunks))
        table = {ord(c): self.normalizer.normalize_str(c) for c in chars}
        whole: dict[str, str] = {}
        if self.normalizer.strip_accents and needs_whole_text("".join(chars)):
            whole = {c: self.normalizer.normalize_str(c) for c in self._chunks if needs_whole_text(c)}
        split = bert_splitter(set("".join(table.values())) | set("".join(whole.values())))
        out: dict[str, int] = {}
        get = out.get
        for chunk, n in self._chunks.items():
            text = whole.get(chunk) if whole else None
            for word in split(chunk.translate(table) if text is None else text):
                out[word] = get(word, 0) + n
        return out

    def finish(self, progress: Progress | None = None) -> TrainedArtifact:
        words = self.words()
        self._chunks.clear()
        vocab, merges, stop = learn_wordpiece(words, vocab_size=self.vocab_size, specials=self.specials,
                                              min_frequency=self.min_frequency, max_chars=self.max_chars,
                                              progress=progress, score=self.score, backend=self.backend)
        data = tokenizer_json(vocab, self.specials, self.unk_token, self.normalizer, self.max_chars)
        extra = {".vocab.txt": "".join(t + "\n" for t in vocab).encode("utf-8")} if self.vocab_txt else {}
        return TrainedArtifact(data=data, suffix=".tokenizer.json", format="hf_json", kind="wordpiece",
                               vocab_size=len(vocab), extra_files=extra,
                               summary={"merges": merges, "stop_reason": stop, "distinct_words": len(words)})


def bert_splitter(chars: set[str]) -> Callable[[str], list[str]]:
    """``BertPreTokenizer`` for text made of ``chars``, as one regex ``findall``: whitespace separates (dropped),
    every punctuation character is a word of its own (a character that is both is dropped, as there)."""
    space = {c for c in chars if c in WHITESPACE}
    punct = {c for c in chars if is_punctuation(c)} - space
    seps = "".join(re.escape(c) for c in sorted(space | punct))
    alone = "".join(re.escape(c) for c in sorted(punct))
    pattern = (f"[^{seps}]+" if seps else ".+") + (f"|[{alone}]" if alone else "")
    return re.compile(pattern, re.DOTALL).findall


def pair_score(count_ab: int, count_a: int, count_b: int) -> float:
    """The WordPiece score of a pair."""
    return count_ab / (count_a * count_b)


def learn_wordpiece(words: Mapping[str, int], *, vocab_size: int, specials: Sequence[str] = BERT_SPECIALS,
                    min_frequency: int = 2, max_chars: int = 100, progress: Progress | None = None,
                    score: str = "wordpiece", backend: str | None = None) -> tuple[list[str], int, str]:
    """The vocabulary (tokens by id: specials, alphabet, merged pieces) learned from ``words`` (``{word: count}``),
    the number of merges and why training stopped (``vocab_size``, ``min_frequency`` or ``no pairs``). ``score``:
    one of :data:`SCORES` (see the module docstring). ``backend``: the compiled merge loop (``wordpiece_learn`` of
    ``app.engine._native.trainer_module``, same result) or this Python one, as :func:`.compiled.resolve_backend` picks;
    the compiled loop needs every product count(a) * count(b) below 2**53 (symbol occurrences below ~94.9
    million), else the Python loop runs. Raises ``ValueError`` if the specials and the alphabet alone exceed
    ``vocab_size``, or for an unknown ``score``."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, not {score!r}")
    by_count = score == "count"
    seqs: list[list[int]] = []
    sym: list[str] = []
    sym_id: dict[str, int] = {}

    def intern(s: str) -> int:
        i = sym_id.get(s)
        if i is None:
            i = sym_id[s] = len(sym)
            sym.append(s)
        return i

    kept = [w for w in words if w and len(w) <= max_chars]
    alphabet = sorted({w[0] for w in kept} | {PREFIX + ch for ch in set("".join([w[1:] for w in kept]))})
    for s in alphabet:
        intern(s)
    base = len(specials) + len(alphabet)
    if base > vocab_size:
        raise ValueError(f"vocab size {vocab_size} is smaller than the specials and the alphabet ({base})")
    freqs = [words[w] for w in kept]
    occurrences = sum(map(operator.mul, freqs, map(len, kept)))
    if resolve_backend(backend) == "native" and occurrences * occurrences < 1 << 53:
        # the compiled loop splits the words into symbols itself
        new, merged, stop = trainer_module.wordpiece_learn(sym, kept, freqs, base, vocab_size, min_frequency, by_count,
                                                     progress)
        return [*specials, *sym, *new], merged, stop
    for w in kept:
        seqs.append([sym_id[w[0]], *(sym_id[PREFIX + ch] for ch in w[1:])])

    count: list[int] = [0] * len(sym)
    pair_count: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    pairs_of: dict[int, set[tuple[int, int]]] = {}
    for wi, seq in enumerate(seqs):
        f = freqs[wi]
        for x in seq:
            count[x] += f
        for p in zip(seq, seq[1:], strict=False):
            pair_count[p] = pair_count.get(p, 0) + f
            where.setdefault(p, set()).add(wi)
    for p in pair_count:
        pairs_of.setdefault(p[0], set()).add(p)
        pairs_of.setdefault(p[1], set()).add(p)

    version: dict[tuple[int, int], int] = {}
    heap: list[tuple[float, int, str, str, int, tuple[int, int]]] = []

    def push(p: tuple[int, int]) -> None:
        c = pair_count.get(p, 0)
        v = version[p] = version.get(p, 0) + 1
        if c >= min_frequency:
            rank = -float(c) if by_count else -pair_score(c, count[p[0]], count[p[1]])
            heap.append((rank, -c, sym[p[0]], sym[p[1]], v, p))

    for p in pair_count:
        push(p)
    heapq.heapify(heap)

    def push_now(p: tuple[int, int]) -> None:
        n = len(heap)
        push(p)
        if len(heap) > n:
            entry = heap.pop()
            heapq.heappush(heap, entry)

    merged = 0
    stop = "no pairs"
    while True:
        if base + merged >= vocab_size:
            stop = "vocab_size"
            break
        top = None
        while heap:
            entry = heapq.heappop(heap)
            if version.get(entry[5]) == entry[4]:
                top = entry
                break
        if top is None:
            if pair_count:
                stop = "min_frequency"
            break
        a, b = top[5]
        new = sym[a] + sym[b][len(PREFIX):] if sym[b].startswith(PREFIX) else sym[a] + sym[b]
        exists = new in sym_id
        r = intern(new)
        if r == len(count):
            count.append(0)
        touched: set[tuple[int, int]] = set()
        for wi in sorted(where.pop((a, b), ())):
            seq = seqs[wi]
            f = freqs[wi]
            i, n = 0, len(seq)
            hits = 0
            while i < n - 1:
                if seq[i] == a and seq[i + 1] == b:
                    hits += 1
                    i += 2
                else:
                    i += 1
            if not hits:
                continue
            for p in zip(seq, seq[1:], strict=False):
                pair_count[p] -= f
                touched.add(p)
            out: list[int] = []
            i = 0
            while i < n:
                if i < n - 1 and seq[i] == a and seq[i + 1] == b:
                    out.append(r)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seqs[wi] = out
            count[a] -= f * hits
            count[b] -= f * hits
            count[r] += f * hits
            for p in zip(out, out[1:], strict=False):
                pair_count[p] = pair_count.get(p, 0) + f
                where.setdefault(p, set()).add(wi)
                touched.add(p)
        for p in touched:
            if pair_count.get(p, 0) <= 0:
                pair_count.pop(p, None)
                where.pop(p, None)
                version[p] = version.get(p, 0) + 1
                for x in p:
                    ps = pairs_of.get(x)
                    if ps is not None:
                        ps.discard(p)
            else:
                pairs_of.setdefault(p[0], set()).add(p)
                pairs_of.setdefault(p[1], set()).add(p)
        # a raw count changes only where a rewrite touched it; the seed's score also with count(a), count(b)
        rescore = touched if by_count else (touched | pairs_of.get(a, set()) | pairs_of.get(b, set())
                                            | pairs_of.get(r, set()))
        for p in sorted(rescore):
            if p in pair_count:
                push_now(p)
        if len(heap) > 4 * len(pair_count) + 1024:
            heap = [e for e in heap if version.get(e[5]) == e[4]]
            heapq.heapify(heap)
        if not exists:
            merged += 1
        if progress is not None:
            progress(merged, vocab_size - base)
    return list(specials) + sym, merged, stop


def tokenizer_json(vocab: Sequence[str], specials: Sequence[str], unk_token: str, normalizer: BertNormalizer,
                   max_chars: int) -> bytes:
    """A Hugging Face ``tokenizer.json`` for the learned vocabulary (keys in a fixed order, UTF-8, no timestamps)."""
    ids = {t: i for i, t in enumerate(vocab)}
    post = None
    if "[CLS]" in ids and "[SEP]" in ids:
        post = {"type": "BertProcessing", "sep": ["[SEP]", ids["[SEP]"]], "cls": ["[CLS]", ids["[CLS]"]]}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": ids[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for s in specials
        ],
        "normalizer": {"type": "BertNormalizer", "clean_text": normalizer.clean_text,
                       "handle_chinese_chars": normalizer.handle_chinese_chars,
                       "strip_accents": normalizer.strip_accents, "lowercase": normalizer.lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": PREFIX, "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": unk_token, "continuing_subword_prefix": PREFIX,
                  "max_input_chars_per_word": max_chars, "vocab": ids},
    }
    return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
