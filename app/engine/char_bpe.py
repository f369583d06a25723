"""The classic character-level BPE of the textbook (Sennrich et al. 2016; Jurafsky & Martin ch. 2): the model, its
``char_bpe`` artifact, and :class:`CharBPEEncoding`, which the engine's registry serves like any tokenizer
(training lives in :mod:`app.engine.training.char_bpe`).

Model: text is split into words on whitespace (``str.split``); a word is its characters followed by the
end-of-word marker ``</w>``, a symbol of its own. Merges join adjacent symbols; a symbol that ends with the
marker is written ``text</w>``. Characters not seen in training map to the unknown token ``<unk>`` (id 0), one
per character, which never merges.

Encoding a word applies the merges in learned order (equivalently: repeatedly merge the adjacent pair with the
lowest merge index, leftmost first). Decoding joins the symbols' texts and turns each end-of-word marker into
one space, dropping the space after the last word; ``<unk>`` decodes to U+FFFD and a special token to its
string. What round-trips: ``decode(encode(t)) == " ".join(t.split())`` for every text whose characters were all
seen in training — runs of whitespace (tabs, newlines) become single spaces and leading/trailing whitespace is
dropped; unseen characters come back as U+FFFD.

Artifact (format ``char_bpe``, UTF-8 JSON, verified by sha256 like every artifact)::

    {"format": "char_bpe", "version": 1,
     "unknown": "<unk>", "end_of_word": "</w>",
     "n_base": 28,                      # ids 0 .. n_base-1: <unk>, </w>, then the characters by code point
     "vocab": ["<unk>", "</w>", "a", …, "es", "est</w>"],   # id -> symbol as written (not necessarily unique:
                                        #   a text may spell "</w>" literally; ids are what count)
     "merges": [[3, 7, 28], …]}         # [left id, right id, result id] in learned order; a result id may repeat
                                        #   when two splits reach the same symbol

Special tokens live in the manifest (``special_tokens``), with ids after the vocabulary.
"""

from __future__ import annotations

import heapq
import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .cache import CacheStats, PieceCache, default_cache_size
from .dropout import merge_with_dropout
from .encoding import scrub_surrogates
from .errors import ArtifactError, InvalidTokenIdError
from .sampling import Sample
from .store import TokenizerSpec
from .tokenizer import Tokenizer

END_OF_WORD = "</w>"
UNKNOWN = "<unk>"
UNK_ID = 0
ARTIFACT_VERSION = 1
HEAP_THRESHOLD = 64  # words with more symbols use the O(n log n) merge
_WORD = re.compile(r"\S+")  # Python's \s is str.isspace(), the same whitespace as str.split()

Symbol = tuple[str, bool]  # (text, ends the word)


def display_symbol(sym: Symbol) -> str:
    return sym[0] + (END_OF_WORD if sym[1] else "")


@dataclass
class CharBPEModel:
    """A classic BPE model: ``symbols[i]`` is the symbol with id ``i + 1`` (id 0 is ``<unk>``); ``n_base``
    counts ``<unk>``, ``</w>`` and the characters; ``merges`` are ``(left, right, result)`` ids in order."""

    symbols: list[Symbol]
    n_base: int
    merges: list[tuple[int, int, int]]
    segmentation: dict[str, list[int]] = field(default_factory=dict)
    stop_reason: str = ""

    # ------------------------------------------------------------------ views

    @property
    def vocab(self) -> list[str]:
        """Symbol strings by id, ``<unk>`` first."""
        return [UNKNOWN, *(display_symbol(s) for s in self.symbols)]

    @property
    def merge_strings(self) -> list[tuple[str, str]]:
        """The merges as pairs of symbol strings, e.g. ``[("e", "s"), ("es", "t"), ("est", "</w>")]``."""
        v = self.vocab
        return [(v[a], v[b]) for a, b, _ in self.merges]

    def segment(self, word: str) -> list[str]:
        """The symbol strings of ``word`` under this model (see :class:`CharBPEEncoding`)."""
        v = self.vocab
        return [v[i] for i in _Merger(self).encode_word(word)]

    def segment_in_order(self, word: str, merges: Sequence[tuple[int, int, int]] | None = None) -> list[str]:
        """The textbook procedure: apply each merge of ``merges`` (default: the learned ones), in list order, to
        every occurrence in ``word``, one pass per merge. With the learned order this equals :meth:`segment`;
        with another order it generally does not (merge order matters)."""
        ids = [_Merger(self).char_id.get(ch, UNK_ID) for ch in word] + [1]
        for a, b, r in self.merges if merges is None else merges:
            out: list[int] = []
            i = 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
                    out.append(r)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            ids = out
        v = self.vocab
        return [v[i] for i in ids]

    # ------------------------------------------------------------------ artifact

    def to_artifact(self) -> bytes:
        """The ``char_bpe`` artifact (deterministic bytes for equal models)."""
        doc = {
            "format": "char_bpe",
            "version": ARTIFACT_VERSION,
            "unknown": UNKNOWN,
            "end_of_word": END_OF_WORD,
            "n_base": self.n_base,
            "vocab": self.vocab,
            "merges": [list(m) for m in self.merges],
        }
        return (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    @classmethod
    def from_artifact(cls, data: bytes, *, source: str = "<bytes>") -> CharBPEModel:
        """Parse and check an artifact; raises :class:`ArtifactError` if it is malformed or inconsistent."""
        try:
            doc = json.loads(data.decode("utf-8"))
            if doc.get("format") != "char_bpe" or doc.get("version") != ARTIFACT_VERSION:
                raise ValueError("not a char_bpe artifact of version 1")
            vocab = doc["vocab"]
            n_base = doc["n_base"]
            raw_merges = doc["merges"]
            if not (isinstance(vocab, list) and all(isinstance(s, str) for s in vocab) and isinstance(n_base, int)):
                raise ValueError("vocab must be a list of strings and n_base an integer")
            if not 2 <= n_base <= len(vocab) or vocab[0] != UNKNOWN or vocab[1] != END_OF_WORD:
                raise ValueError("ids 0 and 1 must be <unk> and </w>")
            symbols: list[Symbol] = [("", True)]
            for s in vocab[2:n_base]:
                if len(s) != 1:
                    raise ValueError(f"base symbol {s!r} is not one character")
                symbols.append((s, False))
            merges: list[tuple[int, int, int]] = []
            for m in raw_merges:
                a, b, r = (int(x) for x in m)
                if not (0 < a < len(vocab) and 0 < b < len(vocab) and n_base <= r < len(vocab)):
                    raise ValueError(f"merge {m!r} refers to an unknown id")
                if a > len(symbols) or b > len(symbols) or r > len(symbols) + 1:
                    raise ValueError(f"merge {m!r} uses a symbol before it exists")
                left, right = symbols[a - 1], symbols[b - 1]
                if left[1]:
                    raise ValueError(f"merge {m!r} continues a word after its end")
                made = (left[0] + right[0], right[1])
                if r == len(symbols) + 1:
                    symbols.append(made)
                elif symbols[r - 1] != made:
                    raise ValueError(f"merge {m!r} does not produce symbol {r}")
                merges.append((a, b, r))
            if len(symbols) + 1 != len(vocab):
                raise ValueError("vocab has symbols that no merge produces")
            if [display_symbol(s) for s in symbols] != vocab[1:]:
                raise ValueError("vocab strings do not match the merges")
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise ArtifactError(source, f"malformed char_bpe artifact: {exc}") from None
        return cls(symbols=symbols, n_base=n_base, merges=merges)


class _Merger:
    """Applies a model's merges to words (ids), lowest merge index first, leftmost on ties."""

    def __init__(self, model: CharBPEModel) -> None:
        self.char_id = {s[0]: i + 1 for i, s in enumerate(model.symbols) if 1 <= i < model.n_base - 1}
        self.ranks: dict[tuple[int, int], tuple[int, int]] = {}
        for k, (a, b, r) in enumerate(model.merges):
            self.ranks.setdefault((a, b), (k, r))

    def encode_word(self, word: str) -> tuple[int, ...]:
        get_char = self.char_id.get
        ids = [get_char(ch, UNK_ID) for ch in word]
        ids.append(1)
        if len(ids) > HEAP_THRESHOLD:
            return tuple(self._merge_heap(ids))
        get = self.ranks.get
        while len(ids) > 1:
            best: tuple[int, int] | None = None
            at = -1
            for i in range(len(ids) - 1):
                hit = get((ids[i], ids[i + 1]))
                if hit is not None and (best is None or hit[0] < best[0]):
                    best, at = hit, i
            if best is None:
                break
            ids[at : at + 2] = [best[1]]
        return tuple(ids)


    def _merge_heap(self, ids: list[int]) -> list[int]:
        """Same result as the quadratic loop, in O(n log n): a heap of (merge index, position) over a linked
        list of symbols, with stale entries skipped."""
        n = len(ids)
        get = self.ranks.get
        sym = list(ids)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap: list[tuple[int, int, int]] = []
        for i in range(n - 1):
            hit = get((sym[i], sym[i + 1]))
            if hit is not None:
                heap.append((hit[0], i, hit[1]))
        heapq.heapify(heap)
        while heap:
            rank, i, result = heapq.heappop(heap)
            j = nxt[i] if alive[i] else n
            if j >= n or get((sym[i], sym[j])) != (rank, result):
                continue  # stale
            sym[i] = result
            alive[j] = False
            k = nxt[j]
            nxt[i] = k
            if k < n:
                prv[k] = i
                hit = get((result, sym[k]))
                if hit is not None:
                    heapq.heappush(heap, (hit[0], i, hit[1]))
            p = prv[i]
            if p >= 0:
                hit = get((sym[p], result))
                if hit is not None:
                    heapq.heappush(heap, (hit[0], p, hit[1]))
        return [sym[i] for i in range(n) if alive[i]]


class CharBPEEncoding(Tokenizer):
    """A classic character BPE tokenizer with the public surface of :class:`~app.engine.encoding.RankBPETokenizer`.

    Text is always ordinary text (special tokens only by name, via ``prefix``/``suffix``/:class:`Special`).
    Thread-safe. Ids: 0 ``<unk>``, 1 ``</w>``, characters, merged symbols, then special tokens.
    """

    pattern = ""  # no regex pre-tokenizer: words are split on whitespace
    backend = "python"  # the classic kind has no compiled path

    def __init__(
        self,
        name: str,
        model: CharBPEModel,
        *,
        special_tokens: Mapping[str, int] | None = None,
        cache_size: int | None = None,
        spec: TokenizerSpec | None = None,
    ) -> None:
        """Raises ``ValueError`` if a special token's id collides with an ordinary id."""
        self.name = name
        self.spec = spec
        self.model = model
        self._merger = _Merger(model)
        self._vocab = model.vocab
        n_ordinary = len(self._vocab)
        self._init_special_tokens(special_tokens or {}, lambda token_id: token_id < n_ordinary)
        self.max_token_value = max([n_ordinary - 1, *self._special_tokens.values()])
        self.n_vocab = self.max_token_value + 1
        # id -> (decoded text, ends a word) for ordinary ids
        self._pieces: list[tuple[str, bool]] = [("\ufffd", False)] + list(model.symbols)
        self._cache = PieceCache(self._merger.encode_word, default_cache_size() if cache_size is None else cache_size)

    @classmethod
    def from_spec(cls, spec: TokenizerSpec, *, cache_size: int | None = None) -> CharBPEEncoding:
        """Load and verify the artifact of ``spec``; raises :class:`ArtifactError`."""
        data = spec.read_artifact()
        model = CharBPEModel.from_artifact(data, source=str(spec.artifact_path))
        tokenizer = cls(spec.name, model, special_tokens=spec.special_tokens, cache_size=cache_size, spec=spec)
        spec.check_vocab_size(tokenizer.n_vocab)
        return tokenizer

    @property
    def unk_id(self) -> int:
        """``<unk>``: what a character outside the vocabulary becomes."""
        return UNK_ID

    def __repr__(self) -> str:
        return f"<CharBPEEncoding {self.name!r}>"

    # ------------------------------------------------------------------ encoding

    def _encode_text(self, text: str) -> list[int]:
        out: list[int] = []
        get = self._cache.lookup
        for word in scrub_surrogates(text).split():
            out.extend(get(word))
        return out

    def check_sample(self, sample: Sample) -> None:
        """Classic BPE samples with BPE-dropout (``dropout``)."""
        sample.for_bpe(self.name)

    def _sample_text(self, text: str, sample: Sample, rng: random.Random) -> list[int]:
        """BPE-dropout over the learned merges (:func:`app.engine.dropout.merge_with_dropout`): ``dropout=0`` is
        the deterministic encoding, 1 leaves each word's characters and its ``</w>``."""
        p = sample.for_bpe(self.name)
        if p <= 0.0:
            return self._encode_text(text)
        get_char, get = self._merger.char_id.get, self._merger.ranks.get
        out: list[int] = []
        for word in scrub_surrogates(text).split():
            ids = [*(get_char(ch, UNK_ID) for ch in word), 1]
            out.extend(merge_with_dropout(ids, None, lambda a, b: get((a, b)), rng, p)[0])
        return out

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and per-token ``(start, end)`` character offsets in (surrogate-scrubbed) ``text``.

        The end-of-word marker covers no character: a token that is only ``</w>`` has ``start == end``.
        """
        text = scrub_surrogates(text)
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        get = self._cache.lookup
        pieces = self._pieces
        for m in _WORD.finditer(text):
            pos = m.start()
            for t in get(m.group()):
                n = 1 if t == UNK_ID else len(pieces[t][0])
                ids.append(t)
                spans.append((pos, pos + n))
                pos += n
        return ids, spans

    # ------------------------------------------------------------------ decoding

    def _parts(self, ids: Iterable[int], skip_special: bool) -> list[tuple[str, bool]]:
        out: list[tuple[str, bool]] = []
        pieces = self._pieces
        n_ordinary = len(pieces)
        for index, t in enumerate(ids):
            if type(t) is int and 0 <= t < n_ordinary:
                out.append(pieces[t])
                continue
            special = self._special_by_id.get(t) if type(t) is int else None
            if special is None:
                raise InvalidTokenIdError(t, self.name, self.n_vocab, index=index)
            if not skip_special:
                out.append((special, False))
        return out

    def decode_tokens_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> list[bytes]:
        """Each token's contribution to :meth:`decode`: its text, plus one space if it ends a word (``<unk>`` is
        U+FFFD). Raises :class:`InvalidTokenIdError`."""
        return [(t + (" " if eow else "")).encode("utf-8") for t, eow in self._parts(ids, skip_special)]

    def decode(self, ids: Sequence[int], *, errors: str = "replace", skip_special: bool = False) -> str:
        """Text of ``ids``: symbol texts joined, each end-of-word marker as one space, none after the last word.
        ``errors`` is accepted for interface compatibility (the text is always valid)."""
        parts = self._parts(ids, skip_special)
        text = "".join(t + (" " if eow else "") for t, eow in parts)
        if parts and parts[-1][1]:
            text = text[:-1]
        return text

    def decode_bytes(self, ids: Sequence[int], *, skip_special: bool = False) -> bytes:
        """UTF-8 of :meth:`decode`."""
        return self.decode(ids, skip_special=skip_special).encode("utf-8")

    # ------------------------------------------------------------------ introspection

    def cache_stats(self) -> CacheStats:
        """Counters of the per-word cache."""
        return self._cache.stats()

    def clear_cache(self) -> None:
        """Empty the per-word cache."""
        self._cache.clear()
