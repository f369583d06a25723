"""SentencePiece-style training on raw text (``sentencepiece-unigram``, ``sentencepiece-bpe``): a real ``.model``.

No pre-tokenizer is assumed: a line is normalized as SentencePiece's ``identity`` normalizer does (with
``remove_extra_whitespaces``: leading/trailing spaces dropped, runs of spaces collapsed), spaces are escaped
as ``▁`` (U+2581), ``add_dummy_prefix`` puts one ``▁`` in front, and the text is cut before every ``▁`` into
words (SentencePiece's own whitespace splitting, which shapes training only; encoding sees the whole text).
The same training therefore works for scripts without spaces — a Japanese or Thai line is one long word and
its pieces are learned from its substrings.

Characters: the most frequent characters covering ``character_coverage`` of the corpus are required (always
pieces); the rest are left to ``<unk>`` or, with ``byte_fallback``, to the 256 ``<0xNN>`` byte pieces. U+0000 and
U+001F are never one (SentencePiece's trainer skips them: its loader refuses a piece holding U+0000, and
``sentencepiece`` 0.2.3's trainer treats U+001F as a boundary): they are always unknown.

Which pieces may be learned: SentencePiece's trainer's rules with its defaults (:mod:`.piece_rules`), in both
learners: at most ``max_piece_length`` characters; with ``split_by_unicode_script`` (default on) no piece mixes
Unicode scripts (Hiragana and Katakana count as Han); with ``split_by_number`` (default on) digits are a script of
their own (``Common``, like punctuation); with ``split_by_whitespace`` (default on) ``▁`` only at a piece's start
and a line is cut into words before every ``▁`` (off: a line is one word, and ``▁`` may sit anywhere in a piece
but at its end); with ``split_digits`` no piece joins a digit to anything. The options are recorded in the
``TrainerSpec``.

* ``unigram``: :func:`.unigram.learn_unigram` (EM, pruning); pieces scored by log probability.
* ``bpe``: the merge learner of the byte-level trainer (:func:`.compiled.learn`, compiled when built) over
  characters; the *k*-th merged piece scores ``-k`` (SentencePiece merges the pair whose result scores highest,
  which replays the merges in learned order), the characters follow with lower scores.

The file: ``<unk>`` (id 0), ``<s>``, ``</s>`` and any extra control pieces, the byte pieces when enabled,
then the learned pieces best first; ``TrainerSpec``/``NormalizerSpec`` record the model type, the options the
encoder needs and the ``identity`` normalizer. It is written by :func:`model_proto_bytes`: the bytes that the
``ModelProto`` message class of :mod:`app.engine.pipeline.sentencepiece` serializes deterministically (the tests
compare them), without importing ``protobuf``; the ``sentencepiece`` package and this engine's loader read it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ..pipeline.sp_types import BPE, BYTE, CONTROL, NORMAL, UNIGRAM, UNKNOWN
from .compiled import learn, learn_merges_native, resolve_backend
from .merges import text_order_key
from .piece_rules import PieceRules, is_decimal_digit
from .trainer import Progress, TrainedArtifact
from .unigram import (
    SPACE,
    char_counts,
    learn_unigram,
    required_characters,
    split_before_space,
    split_unknown,
)
from .word_counter import WordCounter

MODEL_TYPES = ("unigram", "bpe")
#: Characters that are never pieces (SentencePiece's trainer leaves them out of the required characters).
NEVER_PIECES = ("\0", "\x1f")
_F32 = struct.Struct("<f")
_SHORT_HEAD = [bytes((0x0A, n + 9, 0x0A, n)) for n in range(119)]  # a piece's header: its length fits one byte
_TYPE_TAIL = [bytes((0x18, k)) for k in range(128)]


def sp_words(line: str, *, add_dummy_prefix: bool = True, remove_extra_whitespaces: bool = True) -> list[str]:
    """The words SentencePiece's whitespace splitting makes of one line (see the module docstring)."""
    if remove_extra_whitespaces:
        line = " ".join(p for p in line.split(" ") if p)
    if not line:
        return []
    return split_before_space((SPACE if add_dummy_prefix else "") + line.replace(" ", SPACE))


def sp_lines(line: str, *, add_dummy_prefix: bool = True, remove_extra_whitespaces: bool = True) -> list[str]:
    """The one word a line is without ``split_by_whitespace``: :func:`sp_words` joined."""
    words = sp_words(line, add_dummy_prefix=add_dummy_prefix, remove_extra_whitespaces=remove_extra_whitespaces)
    return ["".join(words)] if words else []


def split_digit_runs(words: Mapping[str, int]) -> dict[str, int]:
    """Words cut so that every decimal digit (:func:`.piece_rules.is_decimal_digit`) is a word of its own
    (``split_digits``)."""
    out: dict[str, int] = {}
    for w, f in words.items():
        start = 0
        for i, ch in enumerate(w):
            if is_decimal_digit(ch):
                if i > start:
                    out[w[start:i]] = out.get(w[start:i], 0) + f
                out[ch] = out.get(ch, 0) + f
                start = i + 1
        if start < len(w):
            out[w[start:]] = out.get(w[start:], 0) + f
    return out


class SentencePieceTrainer:
    """Streaming SentencePiece-style trainer (:class:`~.trainer.Trainer`); see the module docstring."""

    def __init__(self, *, model_type: str, vocab_size: int, byte_fallback: bool = False, split_digits: bool = False,
                 add_dummy_prefix: bool = True, remove_extra_whitespaces: bool = True,
                 character_coverage: float = 0.9995, control_tokens: Sequence[str] = (),
                 max_piece_length: int = 16, shrinking_factor: float = 0.75, seed_size: int = 1_000_000,
                 em_iterations: int = 2, backend: str | None = None, threads: int = 1,
                 prune_loss: str = "sentencepiece", split_by_unicode_script: bool = True,
                 split_by_number: bool = True, split_by_whitespace: bool = True) -> None:
        """``vocab_size`` counts every piece (``<unk>``, ``<s>``, ``</s>``, ``control_tokens``, bytes, learned).
        ``backend`` picks the compiled or Python learners (same result); ``threads``: the Unigram learner's
        (:func:`.unigram.learn_unigram`), like ``prune_loss``. ``split_by_*``, ``split_digits`` and
        ``max_piece_length``: the piece rules of the module docstring (SentencePiece's defaults)."""
        if not 1 <= max_piece_length <= 512:
            raise ValueError("max piece length must be in 1..512")
        if model_type not in MODEL_TYPES:
            raise ValueError(f"model type must be one of {MODEL_TYPES}, not {model_type!r}")
        meta = ["<unk>", "<s>", "</s>", *control_tokens]
        if len(set(meta)) != len(meta) or any(not s for s in meta):
            raise ValueError("control tokens must be distinct non-empty strings other than <unk>, <s>, </s>")
        self.model_type = model_type
        self.vocab_size = vocab_size
        self.byte_fallback = byte_fallback
        self.split_digits = split_digits
        self.split_by_unicode_script = split_by_unicode_script
        self.split_by_number = split_by_number
        self.split_by_whitespace = split_by_whitespace
        self.rules = PieceRules.sentencepiece(split_digits=split_digits,
                                              split_by_unicode_script=split_by_unicode_script,
                                              split_by_number=split_by_number, split_by_whitespace=split_by_whitespace,
                                              max_length=max_piece_length)
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.coverage = character_coverage
        self.meta = meta
        self.max_piece_length = max_piece_length
        self.unigram_options = dict(max_piece_length=max_piece_length, shrinking_factor=shrinking_factor,
                                    seed_size=seed_size, em_iterations=em_iterations, backend=backend,
                                    threads=threads, prune_loss=prune_loss)
        self.backend = backend
        # the compiled counter covers SentencePiece's splitting with remove_extra_whitespaces and split_by_whitespace
        self._words = WordCounter("sentencepiece", self._split, dummy_prefix=add_dummy_prefix,
                                  backend=backend if remove_extra_whitespaces and split_by_whitespace else "python")

    def _split(self, line: str) -> list[str]:
        split = sp_words if self.split_by_whitespace else sp_lines
        return split(line, add_dummy_prefix=self.add_dummy_prefix,
                     remove_extra_whitespaces=self.remove_extra_whitespaces)

    def feed(self, text: str) -> None:
        self._words.feed(text)

    def feed_utf8(self, data: bytes) -> None:
        """:meth:`feed` of ``data.decode("utf-8", errors="replace")`` (decoded only where needed)."""
        self._words.feed_utf8(data)

    def valid(self, piece: str) -> bool:
        """May ``piece`` (two or more characters) be learned?"""
        return self.rules(piece)

    def finish(self, progress: Progress | None = None) -> TrainedArtifact:
        n_fixed = len(self.meta) + (256 if self.byte_fallback else 0)
        budget = self.vocab_size - n_fixed
        counter = self._words.counter
        if self.model_type == "bpe" and counter is not None and not self.split_digits:
            # the compiled path: the words stay in the counter; the learner takes them from it directly
            counts, distinct = counter.char_counts(*self._words.word_rules)
            for ch in NEVER_PIECES:  # never pieces (as on the other path)
                counts.pop(ch, None)
            required = required_characters({}, self.coverage, counts=counts)
            self._check_budget(budget, len(required), n_fixed)
            learned: list[tuple[str, float]]
            learned, merges, stop = self._bpe(counter, required, budget, progress)
            self._words.clear()
            summary: dict[str, object] = {"distinct_words": distinct, "required_characters": len(required),
                                          "merges": merges, "stop_reason": stop}
            return self._artifact(learned, summary, n_fixed)
        words: dict[str, int] = self._words.words()
        self._words.clear()
        counts = char_counts(words, backend=self.backend)
        for ch in NEVER_PIECES:  # as in SentencePiece: never pieces (its loader refuses U+0000); unknown
            counts.pop(ch, None)
        required = required_characters(words, self.coverage, counts=counts)
        pieces_words = split_unknown(words, set(required), backend=self.backend)
        if self.split_digits:
            pieces_words = split_digit_runs(pieces_words)
        self._check_budget(budget, len(required), n_fixed)
        summary = {"distinct_words": len(words), "required_characters": len(required)}
        if self.model_type == "unigram":
            learned, info = learn_unigram(pieces_words, vocab_size=budget, required=required,
                                          valid=self.rules,
                                          progress=progress, **self.unigram_options)  # type: ignore[arg-type]
            summary.update(info)
        else:
            learned, merges, stop = self._bpe(pieces_words, required, budget, progress)
            summary.update(merges=merges, stop_reason=stop)
        return self._artifact(learned, summary, n_fixed)

    def _check_budget(self, budget: int, n_required: int, n_fixed: int) -> None:
        if budget < n_required:
            raise ValueError(f"vocab size {self.vocab_size} leaves {budget} pieces for {n_required} required "
                             f"characters (plus {n_fixed} control/byte pieces)")

    def _artifact(self, learned: Sequence[tuple[str, float]], summary: dict[str, object],
                  n_fixed: int) -> TrainedArtifact:
        data = self._model_proto(learned)
        summary["pieces"] = len(learned)
        kind = "unigram" if self.model_type == "unigram" else "bpe"
        return TrainedArtifact(data=data, suffix=".model", format="sentencepiece", kind=kind,
                               vocab_size=n_fixed + len(learned), summary=summary)

    def _bpe(self, words: Mapping[str, int] | Any, required: Sequence[str], budget: int,
             progress: Progress | None) -> tuple[list[tuple[str, float]], int, str]:
        """The merges over ``words``: a ``{word: count}`` of kept characters, or the compiled counter of the words
        (then cut around the other characters in C)."""
        n_merges = budget - len(required)

        def step(n: int) -> None:
            if progress is not None:
                progress(n, n_merges)

        options: dict[str, Any] = dict(
            base_symbols=list(required), concat=lambda x, y: x + y, order_key=text_order_key, unit_length=len,
            max_symbols=budget, min_frequency=2, tie_break="first-seen", progress=step, valid=self.rules,
        )
        if not isinstance(words, Mapping):  # the compiled counter
            res = learn_merges_native(words, None, keep_words=False, consume=True, alphabet="".join(required),
                                      word_rules=self._words.word_rules, **options)
        elif resolve_backend(self.backend) == "native":  # the words as str over the alphabet of required characters
            res = learn_merges_native(list(words), list(words.values()), keep_words=False,
                                      alphabet="".join(required), **options)
        else:
            index = {ch: i for i, ch in enumerate(required)}
            res = learn([list(map(index.__getitem__, w)) for w in words], list(words.values()), backend="python",
                        keep_words=False, **options)
        symbols: list[str] = res.symbols  # type: ignore[assignment]
        merged = symbols[len(required):]
        learned = [(p, -float(k)) for k, p in enumerate(merged)]
        learned += [(ch, -float(len(merged) + k)) for k, ch in enumerate(required)]
        return learned, len(res.merges), res.stop_reason

    def _model_proto(self, learned: Sequence[tuple[str, float]]) -> bytes:
        pieces: list[tuple[str, float, int]] = [(name, 0.0, UNKNOWN if i == 0 else CONTROL)
                                                for i, name in enumerate(self.meta)]
        if self.byte_fallback:
            pieces += [(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
        pieces += [(piece, score, NORMAL) for piece, score in learned]
        trainer = [(3, UNIGRAM if self.model_type == "unigram" else BPE), (4, len(pieces)),
                   (20, self.max_piece_length), (21, self.split_by_unicode_script), (22, self.split_by_whitespace),
                   (23, self.split_by_number), (25, self.split_digits), (35, self.byte_fallback), (40, 0), (41, 1),
                   (42, 2), (43, -1)]
        normalizer = [(3, self.add_dummy_prefix), (4, self.remove_extra_whitespaces), (5, True)]
        return model_proto_bytes(pieces, trainer, normalizer)


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative int32 values are written as 64-bit two's complement (ten bytes)
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes or message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def model_proto_bytes(pieces: Sequence[tuple[str, float, int]], trainer: Sequence[tuple[int, int]],
                      normalizer: Sequence[tuple[int, int]], normalizer_name: str = "identity") -> bytes:
    """A serialized ``ModelProto`` (the ``.model`` file): ``pieces`` as ``(piece, score, type)``; ``trainer`` and
    ``normalizer``: the set varint fields of ``TrainerSpec`` / ``NormalizerSpec`` (``(field number, value)``,
    ascending; bools as 0/1), plus the normalizer's ``name``. The bytes are the ones the ``protobuf`` runtime's
    deterministic serialization gives for the same message with these fields set (proto2: a set field is written
    even when it holds its default; fields in number order; the tests compare the two), written directly so that
    training does not import ``protobuf``."""
    parts: list[bytes] = []
    add = parts.append
    pack = _F32.pack
    for piece, score, kind in pieces:  # ModelProto.pieces: field 1, length-delimited
        p = piece.encode("utf-8")
        n = len(p)
        if n < 119 and 0 <= kind < 128:  # every length and the type fit in one byte (the usual case)
            add(_SHORT_HEAD[n])
            add(p)
            add(b"\x15" + pack(score))
            add(_TYPE_TAIL[kind])
        else:
            body = _field(1, p) + b"\x15" + pack(score) + b"\x18" + _varint(kind)
            add(b"\x0a" + _varint(len(body)) + body)
    out = bytearray(b"".join(parts))
    out += _field(2, b"".join(_varint(n << 3) + _varint(int(v)) for n, v in trainer))
    out += _field(3, _field(1, normalizer_name.encode("utf-8"))
                  + b"".join(_varint(n << 3) + _varint(int(v)) for n, v in normalizer))
    return bytes(out)
