"""tiktoken-shaped views of one tokenizer of the service: code written against ``tiktoken.Encoding`` can count
and encode through the sidecar.

    enc = RemoteEncoding(Client("http://127.0.0.1:8000"), "cl100k_base")
    enc.encode("hello <|endoftext|>", allowed_special="all")     # [15339, 220, 100257], as tiktoken

``encode`` keeps tiktoken's special-token arguments (see :mod:`app.compat.special_args`): the client checks the
text for disallowed special tokens' strings (``ValueError``), and sends the allowed ones it finds as named
``parts`` — the service itself still never reads a special token out of text. The special-token table comes
from ``GET /tokenizers/{name}`` (fetched once). Errors of the service raise :mod:`app.client.errors` types; an id
outside the vocabulary raises :class:`~app.client.errors.InvalidTokenIdError`, which is also a ``KeyError``
(tiktoken's type).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.compat import special_args
from app.compat.special_args import Allowed, Disallowed

from .aio import AsyncClient
from .results import TokenizerDetail
from .sync import Client


@dataclass(frozen=True)
class _Name:
    """A special token by name, as a part."""

    name: str


class _Specials:
    """The special-token table of one tokenizer and tiktoken's argument rules over it."""

    def __init__(self, info: TokenizerDetail) -> None:
        self.info = info
        self.set = set(info.special_tokens)
        self.frozen = frozenset(info.special_tokens)

    def parts(self, text: str, allowed_special: Allowed, disallowed_special: Disallowed) -> list[Any] | None:
        """The parts to send for ``text`` (None: send it as plain text). Raises ``ValueError`` as tiktoken."""
        allowed = special_args.resolve(text, allowed_special, disallowed_special, self.set, self.frozen)
        names = self.frozen if allowed is self.set else frozenset(self.set & allowed)
        split = special_args.split(text, names)
        if len(split) == 1:
            return None
        return [_Name(value) if kind == "special" else value for kind, value in split]


def _check_errors(errors: str) -> None:
    if errors != "replace":
        raise ValueError(f"the service decodes with errors='replace'; errors={errors!r} is not available remotely")


class _Shape:
    """The attributes both views share (from the tokenizer's detail)."""

    name: str
    _specials: _Specials | None

    def _table(self) -> _Specials:
        if self._specials is None:
            raise RuntimeError("the tokenizer's details are not loaded yet")
        return self._specials

    @property
    def special_tokens_set(self) -> set[str]:
        """The special tokens' strings."""
        return set(self._table().set)

    @property
    def n_vocab(self) -> int:
        """The vocabulary size (largest id + 1)."""
        return self._table().info.vocab_size

    @property
    def max_token_value(self) -> int:
        """The largest id."""
        return self.n_vocab - 1

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>`` (``KeyError`` if the tokenizer has none)."""
        return self._table().info.special_tokens["<|endoftext|>"]

    def is_special_token(self, token: int) -> bool:
        """True if ``token`` is a special token's id."""
        return token in self._table().info.special_tokens.values()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class RemoteEncoding(_Shape):
    """``tiktoken.Encoding``'s encode/decode/count surface for tokenizer ``name`` of the service behind ``client``.

    Construction fetches the tokenizer's details (raising :class:`~app.client.errors.UnknownTokenizerError` for
    an unknown name)."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        info = client.tokenizer(name)
        self.name = info.name
        self._specials = _Specials(info)

    def encode(self, text: str, *, allowed_special: Allowed = set(),  # noqa: B006 -- tiktoken's signature
               disallowed_special: Disallowed = "all") -> list[int]:
        """tiktoken's ``encode``: ids, with tiktoken's ``allowed_special`` / ``disallowed_special`` rules."""
        parts = self._table().parts(text, allowed_special, disallowed_special)
        if parts is None:
            return self.client.encode(text, tokenizer=self.name).ids
        return self.client.encode_parts(parts, tokenizer=self.name).ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text``, special-token strings encoded as text."""
        return self.client.encode(text, tokenizer=self.name).ids

    def encode_batch(self, text: Sequence[str], *, num_threads: int = 8, allowed_special: Allowed = set(),  # noqa: B006
                     disallowed_special: Disallowed = "all") -> list[list[int]]:
        """:meth:`encode` of each text (one request for the whole batch when no special token is allowed)."""
        plan = [self._table().parts(t, allowed_special, disallowed_special) for t in text]
        if all(p is None for p in plan):
            return self.encode_ordinary_batch(text)
        return [self.client.encode(t, tokenizer=self.name).ids if p is None
                else self.client.encode_parts(p, tokenizer=self.name).ids for t, p in zip(text, plan, strict=True)]

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, in one request."""
        if not text:
            return []
        return [r.ids for r in self.client.encode_batch(text, tokenizer=self.name).results]

    def count(self, text: str, *, allowed_special: Allowed = set(),  # noqa: B006
              disallowed_special: Disallowed = "all") -> int:
        """``len(encode(text, ...))`` without transferring the ids."""
        parts = self._table().parts(text, allowed_special, disallowed_special)
        if parts is None:
            return self.client.count(text, tokenizer=self.name).count
        return self.client.count_parts(parts, tokenizer=self.name).count

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Text of ``tokens`` (invalid UTF-8 as U+FFFD: ``errors="replace"`` is the only mode)."""
        _check_errors(errors)
        return self.client.decode(tokens, tokenizer=self.name).text

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int = 8) -> list[str]:
        """:meth:`decode` of each id list, in one request."""
        _check_errors(errors)
        if not batch:
            return []
        return self.client.decode_batch(batch, tokenizer=self.name).texts


class AsyncRemoteEncoding(_Shape):
    """:class:`RemoteEncoding` over an :class:`~app.client.AsyncClient`: the same methods, awaited. Create it
    with ``await AsyncRemoteEncoding.connect(client, name)`` (which fetches the tokenizer's details)."""

    def __init__(self, client: AsyncClient, name: str, info: TokenizerDetail | None = None) -> None:
        self.client = client
        self.name = info.name if info is not None else name
        self._specials = _Specials(info) if info is not None else None

    @classmethod
    async def connect(cls, client: AsyncClient, name: str) -> AsyncRemoteEncoding:
        """The view of ``name``, its details fetched."""
        return cls(client, name, await client.tokenizer(name))

    async def encode(self, text: str, *, allowed_special: Allowed = set(),  # noqa: B006
                     disallowed_special: Disallowed = "all") -> list[int]:
        """tiktoken's ``encode`` (see :meth:`RemoteEncoding.encode`)."""
        parts = self._table().parts(text, allowed_special, disallowed_special)
        if parts is None:
            return (await self.client.encode(text, tokenizer=self.name)).ids
        return (await self.client.encode_parts(parts, tokenizer=self.name)).ids

    async def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text``, special-token strings encoded as text."""
        return (await self.client.encode(text, tokenizer=self.name)).ids

    async def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, in one request."""
        if not text:
            return []
        return [r.ids for r in (await self.client.encode_batch(text, tokenizer=self.name)).results]

    async def count(self, text: str, *, allowed_special: Allowed = set(),  # noqa: B006
                    disallowed_special: Disallowed = "all") -> int:
        """``len(await encode(text, ...))`` without transferring the ids."""
        parts = self._table().parts(text, allowed_special, disallowed_special)
        if parts is None:
            return (await self.client.count(text, tokenizer=self.name)).count
        return (await self.client.count_parts(parts, tokenizer=self.name)).count

    async def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Text of ``tokens`` (``errors="replace"`` only)."""
        _check_errors(errors)
        return (await self.client.decode(tokens, tokenizer=self.name)).text
