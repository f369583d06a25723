"""tiktoken 0.14's public API over our engine: moving from tiktoken is an import change.

    import app.compat.tiktoken as tiktoken
    enc = tiktoken.get_encoding("cl100k_base")
    enc.encode("hello <|endoftext|>", allowed_special="all")    # [15339, 220, 100257]

Every public function, method and attribute of ``tiktoken`` 0.14 is here with tiktoken's contract: the same ids,
the same results for ``encode_with_unstable``, ``decode_with_offsets`` and ``_encode_bytes``, and the same builtin
exception types (tiktoken defines no exception classes of its own) for the same bad input. Ids come from
:class:`app.engine.RankBPETokenizer` (the compiled core), which the engine's differential suite holds equal to tiktoken.

Special tokens: unlike :mod:`app.engine` (where text is always text), this module keeps tiktoken's rules, because
it serves code written for them inside the user's own process. ``encode`` raises ``ValueError`` when the text
contains a disallowed special token's string (by default: every special token), and encodes the strings named in
``allowed_special`` as their special ids. The HTTP service never uses this module.

Known differences (construction only): the engine needs every single byte in ``mergeable_ranks`` and special ids
distinct from ordinary ones, so ``Encoding(...)`` raises ``ValueError`` for a vocabulary that breaks either rule,
which tiktoken would accept. Encodings come from the bundled store (no download): ``list_encoding_names()`` is
tiktoken's names that the store holds, then the store's other byte-level tokenizers (e.g. ``llama3``).
"""

from __future__ import annotations

import bisect
import functools
import operator
import threading
from collections.abc import Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import regex

from app.engine import InvalidTokenIdError, Special, UnknownTokenizerError, get_store
from app.engine import RankBPETokenizer as _EngineEncoding
from app.engine import get_tokenizer as _engine_encoding
from app.engine.artifact_regex import PatternRejected
from app.engine.bpe import byte_pair_encode
from app.engine.pretokenize import PatternSplitter

from . import special_args
from .special_args import Allowed, Disallowed, raise_disallowed_special_token

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "Encoding",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "raise_disallowed_special_token",
]

#: The tiktoken release whose API and behaviour this module reproduces.
__version__ = "0.14.0"

#: tiktoken's encoding names, in tiktoken's order, and the store tokenizer (name or alias) behind each.
TIKTOKEN_ENCODINGS: dict[str, str] = {
    "gpt2": "gpt2",
    "r50k_base": "r50k_base",
    "p50k_base": "p50k_base",
    "p50k_edit": "p50k_edit",
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_harmony",
}

_U32 = 1 << 32
#: Rust's ``char::is_whitespace`` (the Unicode White_Space property), which tiktoken's unstable-token rule uses.
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_SPACE_BYTES = frozenset(b" \n\t")


def _token_id(token: Any) -> int:
    """``token`` as a u32 id, failing as tiktoken's extension does: ``TypeError`` (not an integer) or
    ``OverflowError`` (negative or >= 2**32)."""
    value = operator.index(token)
    if not 0 <= value < _U32:
        raise OverflowError("out of range integral type conversion attempted")
    return value


def _check_sequence(tokens: Any) -> None:
    """tiktoken takes a token list as a ``Sequence`` (not ``str``); anything else is a ``TypeError``."""
    if isinstance(tokens, str):
        raise TypeError("Can't extract `str` to `Vec`")
    if tokens is None:
        raise TypeError("'None' is not an instance of 'Sequence'")
    if not isinstance(tokens, Sequence):
        raise TypeError(f"'{type(tokens).__name__}' object is not an instance of 'Sequence'")


class Encoding:
    """tiktoken's ``Encoding``: the same constructor, methods, attributes and errors, run by our engine."""

    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
    ) -> None:
        """Build an encoding from a pattern, ranks and special tokens (as tiktoken's constructor).

        ``explicit_n_vocab``, when given, is checked (``AssertionError``) against the token count and the largest
        id. Raises ``ValueError`` for an invalid pattern or a vocabulary our engine cannot run (see the module
        docstring)."""
        if explicit_n_vocab:
            assert len(mergeable_ranks) + len(special_tokens) == explicit_n_vocab
            assert max([*mergeable_ranks.values(), *special_tokens.values()]) == explicit_n_vocab - 1
        try:
            core = _EngineEncoding(
                name, pattern=pat_str, mergeable_ranks=mergeable_ranks, special_tokens=special_tokens
            )
        except (regex.error, PatternRejected) as exc:
            raise ValueError(f"invalid pat_str: {exc}") from exc
        self._setup(name, core, dict(special_tokens))

    @classmethod
    def _from_engine(cls, name: str, core: _EngineEncoding) -> Encoding:
        """Wrap an engine encoding (shared, not copied) under the tiktoken name ``name``."""
        enc = cls.__new__(cls)
        enc._setup(name, core, core.special_tokens)
        return enc

    def _setup(self, name: str, core: _EngineEncoding, special_tokens: dict[str, int]) -> None:
        self.name = name
        self._core = core
        self._pat_str = core.pattern
        self._mergeable_ranks: dict[bytes, int] = core.ranks  # the engine's own table, shared
        self._special_tokens = special_tokens
        self._special_token_values = set(special_tokens.values())
        self._all_specials = frozenset(special_tokens)
        self.max_token_value = core.max_token_value
        self._lazy_lock = threading.Lock()
        self._lazy: dict[str, Any] = {}

    def _sorted_token_bytes(self) -> list[bytes]:
        with self._lazy_lock:
            if "sorted" not in self._lazy:
                self._lazy["sorted"] = sorted(self._mergeable_ranks)
            return self._lazy["sorted"]  # type: ignore[no-any-return]

    def _token_lengths(self) -> list[int]:
        """Byte length of each ordinary token, by id (0 for special and unassigned ids)."""
        with self._lazy_lock:
            if "lengths" not in self._lazy:
                lengths = [0] * self.n_vocab
                for token, rank in self._mergeable_ranks.items():
                    lengths[rank] = len(token)
                self._lazy["lengths"] = lengths
            return self._lazy["lengths"]  # type: ignore[no-any-return]

    def _pretokenizer(self) -> PatternSplitter:
        with self._lazy_lock:
            if "pre" not in self._lazy:
                self._lazy["pre"] = PatternSplitter(self._pat_str)
            return self._lazy["pre"]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    # ------------------------------------------------------------------ special-token arguments

    def _resolve_specials(self, text: str, allowed_special: Allowed, disallowed_special: Disallowed) -> Set[str]:
        """tiktoken's argument rules (:func:`app.compat.special_args.resolve`); returns the allowed set."""
        return special_args.resolve(text, allowed_special, disallowed_special, self.special_tokens_set,
                                    self._all_specials)

    def _parts(self, text: str, allowed: Set[str]) -> list[str | Special]:
        """``text`` cut at every allowed special token's string, leftmost first; the last part is text."""
        if allowed is self.special_tokens_set:
            names = self._all_specials
        else:
            names = frozenset(self._special_tokens.keys() & allowed)
        return [Special(v) if kind == "special" else v for kind, v in special_args.split(text, names)]

    def _encode_native(self, text: str, allowed: Set[str]) -> tuple[list[int], int]:
        """Ids of ``text`` (valid Unicode) with allowed specials, and how many ids the last pre-token produced
        (0 if the text ends with a special token or is empty)."""
        parts = self._parts(text, allowed)
        tokens = self._core.encode_parts(parts)
        last = parts[-1]
        assert isinstance(last, str)
        pieces = self._pretokenizer().pieces(last) if last else []
        if not pieces:
            return tokens, 0
        raw = pieces[-1].encode("utf-8")
        return tokens, 1 if raw in self._mergeable_ranks else len(byte_pair_encode(raw, self._mergeable_ranks))

    def _widen_over_spaces(self, tokens: list[int], n: int) -> int:
        """Grow the unstable tail ``tokens[-n:]`` over preceding all-whitespace tokens when it starts with one
        (a later character can merge runs of spaces and newlines that the pattern split)."""
        table = self._core

        def all_space(token: int) -> bool:
            if token in self._special_token_values:
                return False
            return all(b in _SPACE_BYTES for b in table.token_bytes(token))

        if n > 0 and all_space(tokens[-n]):
            while n < len(tokens) and all_space(tokens[-n - 1]):
                n += 1
        return n

    # ------------------------------------------------------------------ encoding

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text``, special-token strings encoded as text; lone surrogates become U+FFFD."""
        if not isinstance(text, str):
            raise TypeError(f"'{type(text).__name__}' object is not an instance of 'str'")
        return self._core.encode(text)

    def encode(
        self,
        text: str,
        *,
        allowed_special: Allowed = set(),  # noqa: B006 -- tiktoken's signature
        disallowed_special: Disallowed = "all",
    ) -> list[int]:
        """Ids of ``text``. Strings of ``allowed_special`` tokens become their ids; a string of a
        ``disallowed_special`` token (default: every special token not allowed) raises ``ValueError``;
        ``disallowed_special=()`` encodes them as text."""
        allowed = self._resolve_specials(text, allowed_special, disallowed_special)
        if not allowed:
            return self.encode_ordinary(text)
        return self._core.encode_parts(self._parts(text, allowed))

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Allowed = set(),  # noqa: B006
        disallowed_special: Disallowed = "all",
    ) -> npt.NDArray[np.uint32]:
        """:meth:`encode` as a ``numpy`` ``uint32`` array. Lone surrogates raise ``UnicodeEncodeError``."""
        allowed = self._resolve_specials(text, allowed_special, disallowed_special)
        import numpy as np

        text.encode("utf-8")  # tiktoken does not repair surrogates here
        return np.array(self._core.encode_parts(self._parts(text, allowed)), dtype=np.uint32)

    def encode_ordinary_batch(self, text: list[str], *, num_threads: int = 8) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, in order, over up to ``num_threads`` threads."""
        if all(type(t) is str for t in text):
            return self._core.encode_batch(list(text), num_threads=num_threads)
        with ThreadPoolExecutor(num_threads) as pool:
            return list(pool.map(self.encode_ordinary, text))

    def encode_batch(
        self,
        text: list[str],
        *,
        num_threads: int = 8,
        allowed_special: Allowed = set(),  # noqa: B006
        disallowed_special: Disallowed = "all",
    ) -> list[list[int]]:
        """:meth:`encode` of each text, in order (the first failing text's error is raised)."""
        if allowed_special == "all":
            allowed_special = self.special_tokens_set
        if disallowed_special == "all":
            disallowed_special = self.special_tokens_set - allowed_special  # type: ignore[operator]
        if not isinstance(disallowed_special, frozenset):
            disallowed_special = frozenset(disallowed_special)
        if not allowed_special and all(type(t) is str for t in text):
            for t in text:
                self._resolve_specials(t, allowed_special, disallowed_special)
            return self._core.encode_batch(list(text), num_threads=num_threads)
        # Special tokens are cut out in Python (the GIL is held), so threads would not help; the first failing
        # text raises, as with tiktoken's thread pool.
        return [self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special) for t in text]

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Allowed = set(),  # noqa: B006
        disallowed_special: Disallowed = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """The stable ids of ``text`` and every id sequence that may continue them once more text follows.

        ``text.encode()`` starts with the stable ids' bytes, and each completion's bytes (after the stable ones)
        start with the rest of ``text``. Completions are in sorted order (tiktoken's order is arbitrary). Lone
        surrogates raise ``UnicodeEncodeError``.
        """
        allowed = self._resolve_specials(text, allowed_special, disallowed_special)
        text.encode("utf-8")
        tokens, n = self._encode_native(text, allowed)
        if n == 0:
            return tokens, []
        n = self._widen_over_spaces(tokens, n)
        unstable = self._core.decode_bytes(tokens[-n:])
        del tokens[-n:]
        completions: set[tuple[int, ...]] = set()
        if not unstable:
            return tokens, []
        ranks = self._mergeable_ranks
        vocab = self._sorted_token_bytes()
        # Single tokens that start with the unstable bytes (or equal them).
        i = bisect.bisect_left(vocab, unstable)
        while i < len(vocab) and vocab[i].startswith(unstable):
            completions.add((ranks[vocab[i]],))
            i += 1
        # A token straddling the end: keep a prefix of the unstable bytes, complete the rest with any token that
        # starts with it, re-encode, and keep the ids that cover the unstable bytes.
        candidates: list[str] = []  # valid UTF-8: re-encoded with pre-tokenization, in one batch
        for cut in range(1, len(unstable)):
            head, tail = unstable[:cut], unstable[cut:]
            i = bisect.bisect_left(vocab, tail)
            while i < len(vocab) and vocab[i].startswith(tail):
                candidate = head + vocab[i]
                try:
                    candidates.append(candidate.decode("utf-8"))
                except UnicodeDecodeError:  # not text: plain BPE of the bytes
                    completions.add(self._covering(byte_pair_encode(candidate, ranks), len(unstable)))
                i += 1
        for ids in self._core.encode_batch(candidates):
            completions.add(self._covering(ids, len(unstable)))
        # Whitespace at the end may split off once more text follows.
        if len(unstable) > 1:
            last = _last_char(unstable)
            if last is not None and last in _WHITE_SPACE:
                size = len(last.encode("utf-8"))
                if len(unstable) > size:
                    split = byte_pair_encode(unstable[:-size], ranks) + byte_pair_encode(unstable[-size:], ranks)
                    completions.add(tuple(split))
        return tokens, [list(seq) for seq in sorted(completions)]

    def _covering(self, ids: list[int], size: int) -> tuple[int, ...]:
        """The shortest prefix of ``ids`` whose bytes reach ``size`` bytes (all of ``ids`` if they never do)."""
        lengths = self._token_lengths()
        covered = 0
        for n, token in enumerate(ids, 1):
            covered += lengths[token]
            if covered >= size:
                return tuple(ids[:n])
        return tuple(ids)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of the one token (ordinary or special) whose bytes are ``text_or_bytes``; ``KeyError`` if none."""
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        if not isinstance(text_or_bytes, bytes):
            raise TypeError(f"'{type(text_or_bytes).__name__}' object is not an instance of 'bytes'")
        token = self._mergeable_ranks.get(text_or_bytes)
        if token is not None:
            return token
        try:
            return self._special_tokens[text_or_bytes.decode("utf-8")]
        except (UnicodeDecodeError, KeyError):
            raise KeyError(text_or_bytes) from None

    # ------------------------------------------------------------------ decoding

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of ``tokens``; ``KeyError`` for an id outside the vocabulary."""
        _check_sequence(tokens)
        try:
            return self._core.decode_bytes(tokens)
        except InvalidTokenIdError:  # or an int subclass such as bool, which tiktoken takes: go one by one
            return b"".join([self._token_bytes(t, "Invalid token for decoding: {}") for t in tokens])

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """The text of ``tokens``; invalid UTF-8 handled by ``errors`` (lossy ``"replace"`` by default)."""
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id (a special token's UTF-8 string); ``KeyError`` if the id is not assigned."""
        return self._token_bytes(token, "{}")

    def _token_bytes(self, token: Any, missing: str) -> bytes:
        """The bytes of one id; ``KeyError(missing.format(id))`` if it is not assigned (tiktoken words it one way
        for a single token and another for a list)."""
        value = _token_id(token)
        try:
            return self._core.token_bytes(value)
        except InvalidTokenIdError:
            raise KeyError(missing.format(value)) from None

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each id, in order."""
        return [self.decode_single_token_bytes(token) for token in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` and, per token, the index of the first character holding one of its bytes.

        Raises ``UnicodeDecodeError`` if the bytes are not valid UTF-8."""
        chunks = self.decode_tokens_bytes(tokens)
        offsets: list[int] = []
        chars = 0  # characters started so far (lead and ASCII bytes, not continuation bytes)
        for chunk in chunks:
            starts_inside = 0x80 <= chunk[0] < 0xC0
            offsets.append(max(0, chars - starts_inside))
            chars += sum(1 for b in chunk if not 0x80 <= b < 0xC0)
        return b"".join(chunks).decode("utf-8", errors="strict"), offsets

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """:meth:`decode` of each id list, in order."""
        return [self.decode(tokens, errors=errors) for tokens in batch]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        """:meth:`decode_bytes` of each id list, in order."""
        return [self.decode_bytes(tokens) for tokens in batch]

    # ------------------------------------------------------------------ vocabulary

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary token, sorted."""
        return list(self._sorted_token_bytes())

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>`` (``KeyError`` if the encoding has none)."""
        return self._special_tokens["<|endoftext|>"]

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        """The special tokens' strings."""
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        """True if ``token`` is a special token's id."""
        assert isinstance(token, int)
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """``max_token_value + 1``."""
        return self.max_token_value + 1

    # ------------------------------------------------------------------ tiktoken's private helpers (used by its tests)

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """BPE of one piece without pre-tokenization or special tokens."""
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        token = self._mergeable_ranks.get(text_or_bytes)
        return [token] if token is not None else byte_pair_encode(text_or_bytes, self._mergeable_ranks)

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """Pre-tokenize in Python, BPE each piece (the same ids as :meth:`encode_ordinary` for valid text)."""
        return [t for piece in self._pretokenizer().pieces(text) for t in self._encode_single_piece(piece)]

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Ids of arbitrary bytes: the valid UTF-8 prefix as text, the rest (with the last pre-token's bytes)
        by BPE, so that ``decode_bytes`` gives ``text`` back."""
        if not isinstance(text, bytes):
            raise TypeError(f"'{type(text).__name__}' object is not an instance of 'bytes'")
        try:
            return self._core.encode(text.decode("utf-8"))
        except UnicodeDecodeError as exc:
            valid = exc.start
        tokens, n = self._encode_native(text[:valid].decode("utf-8"), frozenset())
        n = self._widen_over_spaces(tokens, n)
        if tokens and n > 0:
            rest = self._core.decode_bytes(tokens[-n:]) + text[valid:]
            del tokens[-n:]
        else:
            rest = text[valid:]
        return tokens + byte_pair_encode(rest, self._mergeable_ranks)

    # ------------------------------------------------------------------ pickling

    def __getstate__(self) -> object:
        if self is _ENCODINGS.get(self.name):  # a registered encoding travels by name
            return self.name
        return {
            "name": self.name,
            "pat_str": self._pat_str,
            "mergeable_ranks": self._mergeable_ranks,
            "special_tokens": self._special_tokens,
        }

    def __setstate__(self, value: object) -> None:
        if isinstance(value, str):
            self.__dict__ = get_encoding(value).__dict__
            return
        assert isinstance(value, dict)
        self.__init__(**value)  # type: ignore[misc]


def _last_char(data: bytes) -> str | None:
    """The last character of ``data`` if its final bytes are one complete UTF-8 character, else None."""
    for size in range(1, min(4, len(data)) + 1):
        try:
            char = data[-size:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return char if len(char) == 1 else None
    return None


# ---------------------------------------------------------------------- registry

_lock = threading.RLock()
_ENCODINGS: dict[str, Encoding] = {}


def _available() -> dict[str, str]:
    """Encoding name -> store tokenizer: tiktoken's names the store holds, then its other byte-level tokenizers."""
    store = get_store()
    out: dict[str, str] = {}
    for name, target in TIKTOKEN_ENCODINGS.items():
        try:
            if store.spec(target).kind == "byte_bpe":
                out[name] = target
        except UnknownTokenizerError:
            continue
    taken = {store.resolve(target) for target in out.values()}
    for spec in store:
        if spec.kind == "byte_bpe" and spec.name not in taken and spec.name not in out:
            out[spec.name] = spec.name
    return out


def get_encoding(encoding_name: str) -> Encoding:
    """The encoding called ``encoding_name`` (memoised). ``ValueError`` for a non-string or an unknown name."""
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    enc = _ENCODINGS.get(encoding_name)
    if enc is not None:
        return enc
    with _lock:
        enc = _ENCODINGS.get(encoding_name)
        if enc is None:
            available = _available()
            if encoding_name not in available:
                raise ValueError(
                    f"Unknown encoding {encoding_name}.\nKnown encodings: {list(available)}\n"
                    f"tiktoken version: {__version__} (app.compat.tiktoken over the bundled store)"
                )
            core = _engine_encoding(available[encoding_name])
            if not isinstance(core, _EngineEncoding):  # only byte-level BPE is listed; a changed store is not
                raise ValueError(f"Unknown encoding {encoding_name}: not a byte-level BPE tokenizer")
            enc = _ENCODINGS[encoding_name] = Encoding._from_engine(encoding_name, core)
        return enc


def list_encoding_names() -> list[str]:
    """Names :func:`get_encoding` accepts, tiktoken's first (in tiktoken's order)."""
    return list(_available())


# ---------------------------------------------------------------------- models (tiktoken 0.14's tables)

MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    "o1-": "o200k_base",
    "o3-": "o200k_base",
    "o4-mini-": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.5-": "o200k_base",
    "gpt-4.1-": "o200k_base",
    "chatgpt-4o-": "o200k_base",
    "gpt-4o-": "o200k_base",
    "gpt-4-": "cl100k_base",
    "gpt-3.5-turbo-": "cl100k_base",
    "gpt-35-turbo-": "cl100k_base",
    "gpt-oss-": "o200k_harmony",
    "ft:gpt-4o": "o200k_base",
    "ft:gpt-4": "cl100k_base",
    "ft:gpt-3.5-turbo": "cl100k_base",
    "ft:davinci-002": "cl100k_base",
    "ft:babbage-002": "cl100k_base",
}

MODEL_TO_ENCODING: dict[str, str] = {
    **dict.fromkeys(["o1", "o3", "o4-mini", "gpt-5", "gpt-4.1", "gpt-4o"], "o200k_base"),
    **dict.fromkeys(
        ["gpt-4", "gpt-3.5-turbo", "gpt-3.5", "gpt-35-turbo", "davinci-002", "babbage-002", "text-embedding-ada-002",
         "text-embedding-3-small", "text-embedding-3-large"],
        "cl100k_base",
    ),  # fmt: skip
    **dict.fromkeys(
        ["text-davinci-003", "text-davinci-002", "code-davinci-002", "code-davinci-001", "code-cushman-002",
         "code-cushman-001", "davinci-codex", "cushman-codex"],
        "p50k_base",
    ),  # fmt: skip
    **dict.fromkeys(["text-davinci-edit-001", "code-davinci-edit-001"], "p50k_edit"),
    **dict.fromkeys(
        ["text-davinci-001", "text-curie-001", "text-babbage-001", "text-ada-001", "davinci", "curie", "babbage",
         "ada", "text-similarity-davinci-001", "text-similarity-curie-001", "text-similarity-babbage-001",
         "text-similarity-ada-001", "text-search-davinci-doc-001", "text-search-curie-doc-001",
         "text-search-babbage-doc-001", "text-search-ada-doc-001", "code-search-babbage-code-001",
         "code-search-ada-code-001"],
        "r50k_base",
    ),  # fmt: skip
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}


def encoding_name_for_model(model_name: str) -> str:
    """The encoding name of a model: an exact name first, then the first matching prefix (tiktoken's rules, so
    ``gpt-4o-2024-05-13`` and even unreleased versions resolve). ``KeyError`` if nothing matches."""
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return encoding_name
    raise KeyError(
        f"Could not automatically map {model_name} to a tokeniser. "
        "Please use `tiktoken.get_encoding` to explicitly get the tokeniser you expect."
    )


def encoding_for_model(model_name: str) -> Encoding:
    """:func:`get_encoding` of :func:`encoding_name_for_model`."""
    return get_encoding(encoding_name_for_model(model_name))
