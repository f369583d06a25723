"""Unigram language-model training (Kudo 2018), the algorithm both Unigram kinds share, and the ``unigram`` kind.

The learner (:func:`learn_unigram`) works on word frequencies:

1. **Seed.** Every substring of a word up to ``max_piece_length`` characters is counted with the word's
   frequency (the bounded-length equivalent of enumerating a suffix array's repeated substrings); substrings
   seen at least twice are ranked by ``count * length`` and the best ``seed_size`` kept, together with every
   *required* character. A ``valid`` predicate (digits kept apart, whitespace marker only in front …) filters
   candidates. Initial scores are log relative frequencies.
2. **EM.** For each word the lattice of pieces is built once per step; the E-step runs forward-backward in log
   space and adds each piece's posterior count (times the word frequency); the M-step drops pieces expected less
   than half a time (required characters stay) and sets ``score = digamma(count) - digamma(total)`` (the
   Bayesian EM update, close to ``log(count / total)`` but lower for rare pieces). The final scores are log
   relative frequencies.
3. **Prune.** With the Viterbi segmentation of every word, each multi-character piece's removal is priced as
   the log-likelihood lost when its uses are re-segmented by its best alternative (the Viterbi path of the
   piece's own string without it, the counts of that path's pieces adjusted), weighted by the share of words
   that use it; the least costly pieces go until ``shrinking_factor`` of the pieces remain, never below the
   target. Required characters are never pruned, so every word stays segmentable. ``prune_loss`` picks how the
   other counts are renormalized after the removal: ``"sentencepiece"`` (the total grows by the piece's count
   times its alternatives minus one, SentencePiece's trainer) or ``"huggingface"`` (times the number of pieces
   minus one, what Hugging Face's ``UnigramTrainer`` computes: the loss then grows with the number of alternatives,
   which keeps more long pieces and compresses better). Steps 2-3 repeat until at
   most ``1.1 * vocab_size`` pieces remain; then the ``vocab_size`` best-scoring pieces (required characters
   first) are kept and refitted once.

Every ordering uses explicit keys (score, then piece by code point), so results are deterministic.

Compiled path: with the trainer extension built (``backend`` ``native``, the default when it imports; see
:func:`.compiled.resolve_backend`), the seed counting, the E-step and the pruning run in C
(``UnigramWords`` of ``app.engine._native.trainer_module``) on the same lattice with the same floating-point operations
in the same order, so it learns the same pieces with the same scores, bit for bit (the tests compare the two
backends' artifacts byte for byte). ``threads`` splits the E-step and the pruning over the words; the E-step's
per-edge counts are added in corpus order and the pruning sums integers, so the result does not depend on the
number of threads. The Python code below stays the specification.
:func:`viterbi` and :func:`log_likelihood` are the textbook segmentation and forward probability, exposed for
the tests and the pruning comparison (:func:`likelihood_without`).

The ``unigram`` kind (:class:`UnigramTrainer`) prepares words as Hugging Face's Metaspace pre-tokenizer does
(spaces become ``▁``, one ``▁`` in front, a cut before every ``▁``) and writes a ``tokenizer.json`` with the
scores, ``<unk>`` at id 0.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .compiled import resolve_backend, trainer_module
from .piece_rules import SPACE, PieceRules
from .trainer import Progress, TrainedArtifact
from .word_counter import WordCounter

NEG_INF = float("-inf")
#: How the pruning loss renormalizes the counts after a removal (see the module docstring).
PRUNE_LOSSES = ("sentencepiece", "huggingface")
#: The smallest expected count a kept piece is scored with.
MIN_COUNT = 1e-3
Edges = list[tuple[int, int, int]]


def _lse(x: float, y: float) -> float:
    if x < y:
        x, y = y, x
    if y == NEG_INF:
        return x
    return x + math.log1p(math.exp(y - x))


def viterbi(text: str, scores: Mapping[str, float], max_len: int | None = None) -> tuple[list[str], float]:
    """The best segmentation of ``text`` into pieces of ``scores`` (log probabilities) and its total score
    (``([], -inf)`` if none exists). Ties keep the path found first (shorter pieces at earlier starts)."""
    n = len(text)
    longest = max_len or max((len(p) for p in scores), default=0)
    best = [NEG_INF] * (n + 1)
    back: list[tuple[int, str]] = [(0, "")] * (n + 1)
    best[0] = 0.0
    for i in range(n):
        if best[i] == NEG_INF:
            continue
        for j in range(i + 1, min(n, i + longest) + 1):
            s = scores.get(text[i:j])
            if s is not None and best[i] + s > best[j]:
                best[j] = best[i] + s
                back[j] = (i, text[i:j])
    if best[n] == NEG_INF:
        return [], NEG_INF
    out: list[str] = []
    j = n
    while j > 0:
        i, piece = back[j]
        out.append(piece)
        j = i
    return out[::-1], best[n]


def log_likelihood(text: str, scores: Mapping[str, float]) -> float:
    """log P(text): the sum over all segmentations (the forward algorithm); -inf if none exists."""
    n = len(text)
    longest = max((len(p) for p in scores), default=0)
    alpha = [NEG_INF] * (n + 1)
    alpha[0] = 0.0
    for i in range(n):
        if alpha[i] == NEG_INF:
            continue
        for j in range(i + 1, min(n, i + longest) + 1):
            s = scores.get(text[i:j])
            if s is not None:
                alpha[j] = _lse(alpha[j], alpha[i] + s)
    return alpha[n]


def likelihood_without(words: Mapping[str, int], probs: Mapping[str, float], piece: str) -> float:
    """Corpus log-likelihood after removing ``piece`` and renormalizing the other probabilities proportionally
    (no refit): the exact price of a removal that the trainer's pruning approximates."""
    rest = {p: q for p, q in probs.items() if p != piece}
    total = sum(rest.values())
    scores = {p: math.log(q / total) for p, q in rest.items() if q > 0}
    return sum(f * log_likelihood(w, scores) for w, f in words.items())


def learn_unigram(
    words: Mapping[str, int],
    *,
    vocab_size: int,
    required: Sequence[str],
    valid: Callable[[str], bool] | None = None,
    max_piece_length: int = 16,
    seed_size: int = 1_000_000,
    shrinking_factor: float = 0.75,
    em_iterations: int = 2,
    progress: Progress | None = None,
    backend: str | None = None,
    threads: int = 1,
    prune_loss: str = "sentencepiece",
) -> tuple[list[tuple[str, float]], dict[str, object]]:
    """Learn at most ``vocab_size`` scored pieces (``(piece, log probability)``, best first) from ``words``
    (``{word: count}``; a word must consist of ``required`` characters). ``valid(piece)`` may refuse multi-
    character candidates (a :class:`PieceRules`, or any monotone predicate: then the seeds are counted in
    Python). ``backend``/``threads``: see the module docstring (same result either way). Returns the pieces and a
    summary (rounds, seed size, final log-likelihood, backend). ``prune_loss``: see the module docstring. Raises
    ``ValueError`` if ``vocab_size`` is smaller than the required characters, ``threads`` is not in 1..8 or
    ``prune_loss`` is unknown."""
    if not 0 < shrinking_factor < 1:
        raise ValueError("shrinking factor must be in (0, 1)")
    req = sorted(set(required))
    if vocab_size < len(req):
        raise ValueError(f"vocab size {vocab_size} is smaller than the {len(req)} required characters")
    if not 1 <= threads <= 8:
        raise ValueError("threads must be in 1..8")
    if prune_loss not in PRUNE_LOSSES:
        raise ValueError(f"prune loss must be one of {PRUNE_LOSSES}, not {prune_loss!r}")
    hf_loss = prune_loss == "huggingface"
    req_set = set(req)
    native = resolve_backend(backend) == "native"
    uw: Any = None
    if native:
        nonempty = words if "" not in words else {w: f for w, f in words.items() if w}
        uw = trainer_module.UnigramWords(list(nonempty), list(nonempty.values()), max_piece_length)
    # 1. seed
    limit = max(0, seed_size - len(req))
    char_count = char_counts(words, backend=backend)
    freq: dict[str, float] = {ch: float(char_count.get(ch, 0)) or 1.0 for ch in req}
    if uw is not None and (valid is None or isinstance(valid, PieceRules)):
        # the whole loop below, compiled
        marker, flags, max_length = (valid or PieceRules(marker=None)).native()
        names, sc, seed, rounds, ll = uw.learn(
            req, [freq[ch] for ch in req], marker, flags, max_length, limit, vocab_size,
            shrinking_factor, em_iterations, threads, progress, hf_loss)
        return list(zip(names, sc, strict=True)), {"seed_pieces": seed, "rounds": rounds, "log_likelihood": ll,
                                                   "backend": "native"}
    items = [(w, f) for w, f in words.items() if w]
    ranked = _seed_candidates(items, valid, max_piece_length, limit)
    for score, s in ranked:
        freq[s] = float(score)
    pieces = _ordered(freq, req_set)
    seed = len(pieces)
    scores = _normalize(freq, pieces)
    target = int(vocab_size * 1.1)
    rounds = 0
    ll = NEG_INF
    total_steps = max(1, math.ceil(math.log(max(1.0, len(pieces) / max(1, target))) / -math.log(shrinking_factor)))
    while True:
        for _ in range(em_iterations):
            freq, ll = _em_step(items, pieces, scores, max_piece_length, uw, threads)
            freq = {p: c for p, c in freq.items() if c >= 0.5 or p in req_set}
            for ch in req:
                freq.setdefault(ch, 0.0)
            pieces = _ordered(freq, req_set)
            scores = _m_step(freq, pieces)
        rounds += 1
        if progress is not None:
            progress(min(rounds, total_steps), total_steps)
        if len(pieces) <= target:
            break
        pieces = _prune(items, pieces, scores, req_set, max_piece_length,
                        max(target, int(len(pieces) * shrinking_factor)), uw, threads, hf_loss)
        scores = _normalize({p: math.exp(scores[p]) for p in pieces}, pieces)
    # final cut: required characters, then the best scores
    if len(pieces) > vocab_size:
        others = [p for p in pieces if p not in req_set]
        others.sort(key=lambda p: (-scores[p], p))
        pieces = req + others[: vocab_size - len(req)]
        pieces = _ordered({p: math.exp(scores[p]) for p in pieces}, req_set)
        scores = _normalize({p: math.exp(scores[p]) for p in pieces}, pieces)
        freq, ll = _em_step(items, pieces, scores, max_piece_length, uw, threads)
    scores = _normalize(freq, pieces)
    out = sorted(((p, scores[p]) for p in pieces), key=lambda t: (-t[1], t[0]))
    return out, {"seed_pieces": seed, "rounds": rounds, "log_likelihood": ll,
                 "backend": "native" if native else "python"}


def _seed_candidates(items: Sequence[tuple[str, int]], valid: Callable[[str], bool] | None, max_len: int,
                     limit: int) -> list[tuple[int, str]]:
    """Substrings of 2..``max_len`` characters counted with the word frequencies; those seen at least twice as
    ``(count * length, substring)``, best first (ties by code point), at most ``limit``."""
    sub: dict[str, int] = {}
    rules = valid if isinstance(valid, PieceRules) else None
    for w, f in items:
        n = len(w)
        for i in range(n):
            end = min(n, i + max_len)
            if rules is not None:  # the prefix-closed rules bound the extensions; the trailing-marker rule skips some
                end = i + rules.prefix_limit(w[i:end])
                for j in range(i + 2, end + 1):
                    s = w[i:j]
                    if rules.end_ok(s):
                        sub[s] = sub.get(s, 0) + f
                continue
            for j in range(i + 2, end + 1):
                s = w[i:j]
                if valid is not None and not valid(s):
                    break
                sub[s] = sub.get(s, 0) + f
    ranked = sorted(((c * len(s), s) for s, c in sub.items() if c >= 2), key=lambda t: (-t[0], t[1]))
    return ranked[:limit]


def _ordered(freq: Mapping[str, float], req: set[str]) -> list[str]:
    return sorted(freq, key=lambda p: (-freq[p], p))


def digamma(x: float) -> float:
    """The digamma function for ``x > 0`` (recurrence up to 6, then the asymptotic series)."""
    result = 0.0
    while x < 6.0:
        result -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    return result + math.log(x) - 0.5 * inv - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 / 240)))


def _total(values: Sequence[float]) -> float:
    """Left-to-right float sum (``sum()`` compensates rounding from Python 3.12 on; the compiled path adds plainly)."""
    total = 0.0
    for v in values:
        total += v
    return total


def _m_step(freq: Mapping[str, float], pieces: Sequence[str]) -> dict[str, float]:
    """Scores from expected counts, the Bayesian (variational) EM update ``digamma(count) - digamma(total)``:
    like ``log(count / total)`` for frequent pieces, lower for rare ones (which favours dropping them)."""
    counts = [max(freq[p], MIN_COUNT) for p in pieces]
    log_total = digamma(_total(counts))
    return {p: digamma(c) - log_total for p, c in zip(pieces, counts, strict=True)}


def _normalize(freq: Mapping[str, float], pieces: Sequence[str]) -> dict[str, float]:
    """Log relative frequencies; a count below :data:`MIN_COUNT` (a piece kept although almost never
    expected: a required character, or one of the final cut) counts as :data:`MIN_COUNT`."""
    counts = [max(freq[p], MIN_COUNT) for p in pieces]
    log_total = math.log(_total(counts))
    return {p: math.log(c) - log_total for p, c in zip(pieces, counts, strict=True)}


def _prefix_table(pieces: Sequence[str]) -> dict[str, int]:
    """Piece -> id, and every proper prefix of a piece -> -1 (so a lattice scan stops at the first non-prefix)."""
    table: dict[str, int] = {}
    for p in pieces:
        for k in range(1, len(p)):
            table.setdefault(p[:k], -1)
    for i, p in enumerate(pieces):
        table[p] = i
    return table


def _lattice(word: str, table: Mapping[str, int], max_len: int, skip: int = -1) -> Edges:
    """Every ``(start, end, piece id)`` of ``word``, by start then end (``table``: :func:`_prefix_table`)."""
    n = len(word)
    edges: Edges = []
    get = table.get
    for i in range(n):
        for j in range(i + 1, min(n, i + max_len) + 1):
            pid = get(word[i:j])
            if pid is None:
                break
            if pid >= 0 and pid != skip:
                edges.append((i, j, pid))
    return edges


def _em_step(items: Sequence[tuple[str, int]], pieces: Sequence[str], scores: Mapping[str, float],
             max_len: int, uw: Any = None, threads: int = 1) -> tuple[dict[str, float], float]:
    """One E-step: expected piece counts (posterior, times word frequency) and the corpus log-likelihood.
    ``uw``: the compiled ``UnigramWords`` of ``items`` (same result)."""
    if uw is not None:
        uw.set_pieces(list(pieces))
        counts, ll = uw.e_step([scores[p] for p in pieces], threads)
        return dict(zip(pieces, counts, strict=True)), ll
    index = _prefix_table(pieces)
    s = [scores[p] for p in pieces]
    expected = [0.0] * len(pieces)
    total_ll = 0.0
    exp = math.exp
    for w, f in items:
        n = len(w)
        edges = _lattice(w, index, max_len)
        alpha = [NEG_INF] * (n + 1)
        alpha[0] = 0.0
        for i, j, pid in edges:
            a = alpha[i]
            if a != NEG_INF:
                alpha[j] = _lse(alpha[j], a + s[pid])
        z = alpha[n]
        if z == NEG_INF:
            continue
        beta = [NEG_INF] * (n + 1)
        beta[n] = 0.0
        for i, j, pid in reversed(edges):
            b = beta[j]
            if b != NEG_INF:
                beta[i] = _lse(beta[i], b + s[pid])
        for i, j, pid in edges:
            a, b = alpha[i], beta[j]
            if a != NEG_INF and b != NEG_INF:
                expected[pid] += f * exp(a + s[pid] + b - z)
        total_ll += f * z
    return {p: expected[i] for i, p in enumerate(pieces)}, total_ll


def _best_path(word: str, edges: Edges, s: Sequence[float]) -> list[int]:
    n = len(word)
    best = [NEG_INF] * (n + 1)
    back = [(0, -1)] * (n + 1)
    best[0] = 0.0
    for i, j, pid in edges:
        v = best[i] + s[pid]
        if v > best[j]:
            best[j] = v
            back[j] = (i, pid)
    if best[n] == NEG_INF:
        return []
    out: list[int] = []
    j = n
    while j > 0:
        i, pid = back[j]
        out.append(pid)
        j = i
    return out[::-1]


def _prune(items: Sequence[tuple[str, int]], pieces: Sequence[str], scores: Mapping[str, float], req: set[str],
           max_len: int, keep: int, uw: Any = None, threads: int = 1, hf_loss: bool = False) -> list[str]:
    """The ``keep`` pieces whose removal would cost the most likelihood (required characters always kept).
    ``uw``: the compiled ``UnigramWords`` of ``items`` (same result); ``hf_loss``: Hugging Face's
    renormalization (``prune_loss="huggingface"``)."""
    if uw is not None:
        uw.set_pieces(list(pieces))
        fixed = bytes(1 if p in req or len(p) == 1 else 0 for p in pieces)
        mask = uw.prune([scores[p] for p in pieces], fixed, keep, threads, hf_loss)
        return [p for p, k in zip(pieces, mask, strict=True) if k]
    index = _prefix_table(pieces)
    s = [scores[p] for p in pieces]
    vfreq = [0.0] * len(pieces)
    used_by = [0.0] * len(pieces)  # frequency-weighted number of words whose best path uses the piece
    total_words = 0.0
    for w, f in items:
        path = _best_path(w, _lattice(w, index, max_len), s)
        total_words += f
        for pid in path:
            vfreq[pid] += f
        for pid in set(path):
            used_by[pid] += f
    vsum = sum(vfreq) or 1.0
    logsum = math.log(vsum)
    losses: list[tuple[float, str]] = []
    for pid, p in enumerate(pieces):
        if p in req or len(p) == 1:
            continue
        if vfreq[pid] == 0:
            losses.append((NEG_INF, p))
            continue
        alt = _best_path(p, _lattice(p, index, max_len, skip=pid), s)
        if not alt:
            losses.append((float("inf"), p))
            continue
        logprob_sp = math.log(vfreq[pid]) - logsum
        logsum_alt = math.log(vsum + vfreq[pid] * ((len(pieces) if hf_loss else len(alt)) - 1))
        logprob_alt = 0.0  # an explicit left-to-right sum (the compiled path adds in this order)
        for a in alt:
            logprob_alt += math.log(vfreq[a] + vfreq[pid]) - logsum_alt
        share = used_by[pid] / total_words if total_words else 0.0
        losses.append((share * (logprob_sp - logprob_alt), p))
    n_keep = max(0, keep - sum(1 for p in pieces if p in req or len(p) == 1))
    best = heapq.nsmallest(n_keep, losses, key=lambda t: (-t[0], t[1]))
    kept = {p for loss, p in best if loss != NEG_INF}
    return [p for p in pieces if p in req or len(p) == 1 or p in kept]


def character_coverage(char_counts: Mapping[str, int], coverage: float) -> list[str]:
    """The most frequent characters (ties by code point) whose counts cover ``coverage`` of all characters."""
    if not 0 < coverage <= 1:
        raise ValueError("character coverage must be in (0, 1]")
    total = sum(char_counts.values())
    out: list[str] = []
    acc = 0
    for ch, c in sorted(char_counts.items(), key=lambda t: (-t[1], t[0])):
        if out and acc >= coverage * total:
            break
        out.append(ch)
        acc += c
    return out


def char_counts(words: Mapping[str, int], *, backend: str | None = None) -> Counter[str]:
    """How often each character occurs in ``words`` (``{word: count}``); counted in C when the compiled trainer is
    picked (:func:`.compiled.resolve_backend`) and ``words`` is a ``dict`` (same counts)."""
    if isinstance(words, dict) and resolve_backend(backend) == "native":
        return Counter(trainer_module.char_counts(words))
    by_freq: dict[int, list[str]] = {}
    for w, f in words.items():
        by_freq.setdefault(f, []).append(w)
    chars: Counter[str] = Counter()
    for f, ws in by_freq.items():  # the words of one frequency counted at once (C-speed counting)
        for ch, n in Counter("".join(ws)).items():
            chars[ch] += n * f
    return chars


def required_characters(words: Mapping[str, int], coverage: float, *, backend: str | None = None,
                        counts: Mapping[str, int] | None = None) -> list[str]:
    """:func:`character_coverage` of the characters of ``words`` weighted by their frequencies (``counts``: their
    :func:`char_counts` when already known); ``ValueError`` when the words hold no character."""
    chars = char_counts(words, backend=backend) if counts is None else counts
    if not chars:
        raise ValueError("the corpus has no text")
    return character_coverage(chars, coverage)


def split_unknown(words: Mapping[str, int], required: set[str], *, backend: str | None = None) -> dict[str, int]:
    """Words cut around characters outside ``required`` (those are dropped: encoding maps them to unknown or
    bytes), so every remaining word is segmentable; frequencies of equal pieces are summed, order kept. In C
    when the compiled trainer is picked and ``words`` is a ``dict`` (same result)."""
    if isinstance(words, dict) and resolve_backend(backend) == "native":
        return trainer_module.split_unknown(words, required)  # type: ignore[no-any-return]
    unknown = set("".join(words)) - required
    if not unknown:
        return dict(words)
    cut = re.compile("[" + "".join(re.escape(ch) for ch in sorted(unknown)) + "]")
    out: dict[str, int] = {}
    for w, f in words.items():
        if cut.search(w) is None:
            out[w] = out.get(w, 0) + f
            continue
        for piece in cut.split(w):
            if piece:
                out[piece] = out.get(piece, 0) + f
    return out


def split_before_space(text: str) -> list[str]:
    """``text`` cut before every ``▁`` (no empty pieces)."""
    out: list[str] = []
    start = 0
    for i in range(1, len(text)):
        if text[i] == SPACE:
            out.append(text[start:i])
            start = i
    if text:
        out.append(text[start:])
    return out


def metaspace_words(line: str) -> list[str]:
    """The pieces Hugging Face's ``Metaspace`` pre-tokenizer (``▁``, prepend always, split) makes of ``line``."""
    text = line.replace(" ", SPACE)
    if text and not text.startswith(SPACE):
        text = SPACE + text
    return split_before_space(text)


class UnigramTrainer:
    """The ``unigram`` kind (:class:`~.trainer.Trainer`): Metaspace words, a Hugging Face ``tokenizer.json``."""

    def __init__(self, *, vocab_size: int, special_tokens: Sequence[str] = (), unk_token: str = "<unk>",
                 character_coverage: float = 1.0, max_piece_length: int = 16, shrinking_factor: float = 0.75,
                 seed_size: int = 1_000_000, em_iterations: int = 2, backend: str | None = None,
                 threads: int = 1, prune_loss: str = "huggingface") -> None:
        """``vocab_size`` counts every id: ``unk_token`` (id 0), the ``special_tokens`` after it, the pieces.
        ``backend``/``threads``/``prune_loss``: see :func:`learn_unigram` (this kind defaults to Hugging Face's
        pruning loss, the peer whose ``tokenizer.json`` it writes)."""
        specials = [unk_token, *special_tokens]
        if len(set(specials)) != len(specials) or any(not s for s in specials):
            raise ValueError("special tokens must be distinct non-empty strings (and not the unknown token)")
        self.vocab_size = vocab_size
        self.specials = specials
        self.coverage = character_coverage
        self.options = dict(max_piece_length=max_piece_length, shrinking_factor=shrinking_factor,
                            seed_size=seed_size, em_iterations=em_iterations, backend=backend, threads=threads,
                            prune_loss=prune_loss)
        self._words = WordCounter("metaspace", metaspace_words, backend=backend)

    def feed(self, text: str) -> None:
        self._words.feed(text)

    def feed_utf8(self, data: bytes) -> None:
        """:meth:`feed` of ``data.decode("utf-8", errors="replace")`` (decoded only where needed)."""
        self._words.feed_utf8(data)

    def finish(self, progress: Progress | None = None) -> TrainedArtifact:
        words = self._words.words()
        self._words.clear()
        backend = self.options["backend"]
        required = required_characters(words, self.coverage, backend=backend)  # type: ignore[arg-type]
        learned, summary = learn_unigram(
            split_unknown(words, set(required), backend=backend),  # type: ignore[arg-type]
            vocab_size=self.vocab_size - len(self.specials), required=required,
            valid=PieceRules(), progress=progress, **self.options)  # type: ignore[arg-type]
        vocab = [[s, 0.0] for s in self.specials] + [[p, score] for p, score in learned]
        added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True} for i, s in enumerate(self.specials)]
        meta = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}
        doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
               "pre_tokenizer": meta, "post_processor": None, "decoder": meta,
               "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False}}
        data = (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        summary.update(distinct_words=len(words), pieces=len(learned))
        return TrainedArtifact(data=data, suffix=".tokenizer.json", format="hf_json", kind="unigram",
                               vocab_size=len(vocab), summary=summary)
