"""A byte-level BPE ``tokenizer.json`` model as tiktoken-style ranks, with a per-file proof that the two BPEs agree.

Hugging Face's BPE merges by the *merge list*: repeatedly join the adjacent pair of symbols that is listed, the
pair with the lowest merge index first (leftmost on ties). Our compiled core merges by *rank*: repeatedly join the
adjacent pair whose concatenation is any token, the lowest token id first (leftmost on ties), and looks a whole
piece up first. :func:`ranks_from_hf_model` converts a model to ``{token bytes: id}`` and checks, per file, a
condition under which the two give identical ids on every input; when it fails it raises
:class:`NotRankOrdered` and the caller keeps the general pipeline.

The condition (V: the byte-level tokens of the model, bytes plus merge products; R: their ids):

* **K1** every single byte is a token;
* **K2** every merge ``(a, b)`` has ``a``, ``b`` and ``a+b`` in the vocabulary, the products of all merges are
  distinct, and every token of two or more bytes is the product of a merge (vocabulary entries that are the
  product of no merge are unreachable for Hugging Face's BPE and are left out of V; with ``ignore_merges`` they
  would be reachable, so there they make the check fail);
* **K3** merge order is rank order: ``R(a_i+b_i) < R(a_j+b_j)`` for merge indices ``i < j``;
* **K4** for every token ``t`` of V with two or more bytes, rank BPE on ``t``'s bytes alone (from single bytes,
  no whole-piece lookup) reaches two parts, and those two parts are exactly ``t``'s merge ``(a_t, b_t)``.

Why it suffices. Take any input piece and any state of rank BPE on it. (i) *Locality*: a symbol (or a pair of
adjacent symbols) covering bytes ``[u, z)`` was built only by merges inside ``[u, z)``, and those merges were,
in order, the steps of rank BPE on the bytes ``[u, z)`` alone -- each was the lowest-ranked candidate of the
whole state, hence of the candidates inside ``[u, z)``, which change only by merges inside ``[u, z)``.
(ii) So if two adjacent symbols ``x, y`` concatenate to a token ``t``, rank BPE on ``t`` alone reaches the state
``[x, y]``; by K4, ``(x, y)`` is ``t``'s listed merge. Hence in every state the pairs rank BPE may merge are exactly
the listed pairs present (listed products are tokens, by K2). (iii) By K3 and the distinct products of K2, "lowest
merge index, leftmost" and "lowest product rank, leftmost" pick the same pair; both stop when no candidate is left.
By induction the two runs are identical. (iv) Whole-piece lookup: for a token ``t``, K4 says rank BPE on ``t``
reaches ``[a_t, b_t]`` and then joins them (the only candidate), so it yields ``[t]``; looking ``t`` up whole gives
the same, with or without Hugging Face's ``ignore_merges``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from ..bpe import merge_small
from .derived import LazyVocab
from .pre_tokenizers import byte_chars


class NotRankOrdered(ValueError):
    """The model's merge-list BPE is not provably rank BPE (the message says which condition fails and where)."""


@cache
def byte_to_char() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level vocabularies."""
    return dict(enumerate(byte_chars()))


@cache
def _translation() -> dict[int, str]:
    """str.translate table: byte-alphabet character -> the latin-1 character of its byte; every other character
    below U+0100 -> a character above it (so that the latin-1 encoding of the result fails)."""
    table = {ord(c): chr(b) for b, c in byte_to_char().items()}
    for code in range(256):
        table.setdefault(code, "\u0100")
    return table


def token_bytes_of(token: str) -> bytes | None:
    """The bytes a byte-level token string stands for, or None if it has a character outside the byte alphabet."""
    try:
        return token.translate(_translation()).encode("latin-1")
    except UnicodeEncodeError:
        return None


def _merge_pairs(merges: Sequence[Any]) -> list[tuple[str, str]]:
    """The merge list as pairs (``"a b"`` strings or ``[a, b]`` lists, the two forms Hugging Face writes)."""
    if all(type(m) is str for m in merges):
        pairs: list[Any] = [m.split(" ") for m in merges]
    else:
        pairs = [m.split(" ") if isinstance(m, str) else m if isinstance(m, list | tuple) else () for m in merges]
        if not all(isinstance(x, str) for p in pairs for x in p):
            raise NotRankOrdered("a merge is not a pair of token strings")
    for index, pair in enumerate(pairs):
        if len(pair) != 2 or not pair[0] or not pair[1]:
            raise NotRankOrdered(f"merge {index} is not a pair of token strings: {merges[index]!r:.80}")
    return pairs


def last_merges_py(ranks: Mapping[bytes, int], tokens: Iterable[bytes]) -> list[int]:
    """Per token, the byte length of the left part when rank BPE on its bytes alone (no whole-piece lookup) is down
    to two parts, or 0 if it stops earlier (or the token is shorter than two bytes). The reference for the compiled
    core's ``last_merges``; quadratic."""
    out: list[int] = []
    for token in tokens:
        bounds = merge_small(token, ranks, parts=2)
        out.append(bounds[1] if len(bounds) == 3 else 0)
    return out


LastMerges = Callable[[list[bytes]], list[int]]


def ranks_from_hf_model(
    model: Mapping[str, Any],
    added_ids: Mapping[int, str],
    *,
    last_merges: Callable[[dict[bytes, int]], LastMerges] | None = None,
) -> dict[bytes, int]:
    """``{token bytes: id}`` of a byte-level ``BPE`` model section of a ``tokenizer.json``, after checking K1-K4
    (module docstring). ``added_ids``: id -> content of the file's added tokens; a vocabulary entry outside the byte
    alphabet must be one of them (it is then left out of the ranks: BPE cannot produce it).

    ``last_merges``: builds, from the ranks, the K4 helper (the compiled core's ``last_merges``); default: the
    pure-Python :func:`last_merges_py`. Raises :class:`NotRankOrdered` naming the failing condition and token.
    """
    if model.get("type") != "BPE":
        raise NotRankOrdered(f"model type is {model.get('type')!r}, not BPE")
    if model.get("dropout") not in (None, 0, 0.0):
        raise NotRankOrdered("BPE dropout is set")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) not in (None, ""):
            raise NotRankOrdered(f"{key} is set ({model.get(key)!r})")
    vocab = model.get("vocab")
    if isinstance(vocab, LazyVocab):
        vocab = vocab.as_dict()
    if not isinstance(vocab, dict):
        raise NotRankOrdered("model has no vocab object")
    pairs = _merge_pairs(model.get("merges") or [])

    by_string: dict[str, int] = {}
    raw_of: dict[str, bytes] = {}
    seen_ids: dict[int, str] = {}
    table = _translation()
    for token, token_id in vocab.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise NotRankOrdered(f"vocab entry {token!r} has id {token_id!r}")
        if token_id in seen_ids:
            raise NotRankOrdered(f"vocab id {token_id} is used by {seen_ids[token_id]!r} and {token!r}")
        seen_ids[token_id] = token
        try:
            raw_of[token] = token.translate(table).encode("latin-1")
        except UnicodeEncodeError:
            if added_ids.get(token_id) != token:
                raise NotRankOrdered(
                    f"vocab entry {token!r} (id {token_id}) is not byte-level and not an added token"
                ) from None
            continue
        by_string[token] = token_id

    # K1: the 256 single bytes.
    missing = [b for b, c in byte_to_char().items() if c not in by_string]
    if missing:
        raise NotRankOrdered(f"K1: single bytes {missing[:8]} are not tokens")
    # K2 (products known, distinct) and K3 (ids increase along the merge list).
    product_of: dict[str, int] = {}  # product -> merge index
    previous = -1
    for index, (a, b) in enumerate(pairs):
        product = a + b
        rank = by_string.get(product)
        if rank is None or a not in by_string or b not in by_string:
            raise NotRankOrdered(f"K2: merge {index} ({a!r} {b!r}) uses a string that is not a byte-level token")
        if product in product_of:
            raise NotRankOrdered(f"K2: merges {product_of[product]} and {index} both produce {product!r}")
        product_of[product] = index
        if rank <= previous:
            raise NotRankOrdered(f"K3: merge {index} produces id {rank}, not above the previous merge's {previous}")
        previous = rank
    # K2: tokens of two or more bytes that no merge produces.
    orphans = [t for t in by_string if len(t) > 1 and t not in product_of]
    if orphans:
        if model.get("ignore_merges"):
            raise NotRankOrdered(f"K2: {len(orphans)} tokens are no merge's product (e.g. {orphans[0]!r}) and "
                                 "ignore_merges makes them reachable")
        for t in orphans:
            del by_string[t]
    ranks = {raw_of[token]: token_id for token, token_id in by_string.items()}
    # K4: rank BPE of every multi-byte token ends with its listed merge (one character of a byte-level string is
    # one byte, so string lengths are byte lengths).
    products = list(product_of)
    raw_products = [raw_of[t] for t in products]
    helper = last_merges(ranks) if last_merges is not None else (lambda toks: last_merges_py(ranks, toks))
    splits = helper(raw_products)
    wrong = [k for k, (token, left) in enumerate(zip(products, splits, strict=True))
             if left != len(pairs[product_of[token]][0])]
    if wrong:
        token, raw, left = products[wrong[0]], raw_products[wrong[0]], splits[wrong[0]]
        got = "stops before two parts" if left == 0 else f"ends with {raw[:left]!r} + {raw[left:]!r}"
        raise NotRankOrdered(f"K4: rank BPE of {token!r} (id {ranks[raw]}) {got}, but its merge is "
                             f"{pairs[product_of[token]]!r} ({len(wrong)} tokens differ)")
    return ranks


def is_rank_ordered_byte_level_bpe(data: dict[str, Any]) -> bool:
    """True when ``data`` is plain byte-level BPE whose merge list is in the order of its results' ids: BPE
    without byte fallback, unknown token, affixes or ``ignore_merges``; a ByteLevel pre-tokenizer last; a
    ByteLevel decoder. Necessary for a rank-based byte-level core to compute the same merges, not sufficient (a
    rank-based core also joins pairs the merge list lacks when their concatenation is a token): the fast model
    (:func:`~app.engine.pipeline.models.byte_level_rank.byte_level_rank_bpe`) checks the rest and declines what
    it cannot run exactly."""
    model = data.get("model") or {}
    if model.get("type") != "BPE" or model.get("byte_fallback") or model.get("unk_token") is not None:
        return False
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix") or model.get("ignore_merges"):
        return False
    pre_tok = data.get("pre_tokenizer") or {}
    last = (pre_tok.get("pretokenizers") or [{}])[-1] if pre_tok.get("type") == "Sequence" else pre_tok
    if last.get("type") != "ByteLevel" or (data.get("decoder") or {}).get("type") != "ByteLevel":
        return False
    vocab = model.get("vocab") or {}
    previous = -1
    for item in model.get("merges") or []:
        left, right = (item.split(" ", 1) if isinstance(item, str) else item)
        token_id = vocab.get(left + right)
        if token_id is None or token_id <= previous:
            return False
        previous = token_id
    return True
