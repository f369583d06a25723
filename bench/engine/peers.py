"""Engines under benchmark behind one small interface: ours (each backend) and the peers.

Every peer is built without network access: tiktoken from our own artifact files with
``tiktoken.load.load_tiktoken_bpe`` and the reference pattern (never ``tiktoken.get_encoding``, which downloads);
Hugging Face ``tokenizers`` from a ``tokenizer.json`` this module writes from the same ranks; bpe-openai and
quicktok from the data their wheels ship. A peer that is missing or cannot express the encoding is returned as an
:class:`Unavailable` with the reason, never silently dropped.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # HF: no hidden thread pool in single-call timings
os.environ.setdefault("RAYON_NUM_THREADS", "1")

Encode = Callable[[str], list[int]]
#: Bumped when the tokenizer.json recipe changes (it is part of the cache key).
HF_RECIPE = 1


@dataclass
class Engine:
    """One tokenizer implementation of one encoding.

    ``encode(text) -> ids`` is what is timed; ``count``/``batch``/``clear_cache`` are None where the engine has
    no such entry point. ``batch(texts, num_threads) -> list of ids``.
    """

    name: str
    encoding: str
    version: str
    encode: Encode
    count: Callable[[str], int] | None = None
    batch: Callable[[Sequence[str], int], Any] | None = None
    clear_cache: Callable[[], None] | None = None
    note: str = ""
    is_ours: bool = False


@dataclass
class Unavailable:
    """A peer that could not be built for an encoding, and why."""

    name: str
    encoding: str
    reason: str
    version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


# --------------------------------------------------------------------------- ours


def our_backends() -> list[str | None]:
    """Backends to benchmark: both ``"native"`` and ``"python"`` when ``app.engine.get_tokenizer`` takes a
    ``backend=`` keyword, else ``[None]`` (the default engine)."""
    from app.engine import get_tokenizer

    if "backend" in inspect.signature(get_tokenizer).parameters:
        return ["native", "python"]
    return [None]


def ours(encoding: str, backend: str | None) -> Engine | Unavailable:
    """Our engine for ``encoding``; ``backend`` is passed to ``get_tokenizer`` when not None."""
    from app.engine import get_tokenizer

    label = "ours" if backend is None else f"ours-{backend}"
    try:
        tokenizer = get_tokenizer(encoding) if backend is None else get_tokenizer(encoding, backend=backend)  # type: ignore[call-arg]
    except Exception as e:  # noqa: BLE001 - a backend that cannot load is reported, not fatal
        return Unavailable(label, encoding, f"{type(e).__name__}: {e}")

    def batch(texts: Sequence[str], n: int) -> list[list[int]]:
        return tokenizer.encode_batch(texts, num_threads=n)

    return Engine(label, encoding, _version("tokenizer-service") or "work tree", tokenizer.encode, tokenizer.count,
                  batch, tokenizer.clear_cache, note=type(tokenizer).__module__, is_ours=True)


# --------------------------------------------------------------------------- tiktoken


@dataclass(frozen=True)
class LocalSpec:
    """What a peer needs to rebuild one of our encodings: artifact path, pattern, special tokens."""

    name: str
    artifact: Path
    pattern: str
    special_tokens: dict[str, int]


def local_spec(encoding: str) -> LocalSpec:
    """Our store's artifact path, pattern and special tokens for ``encoding``."""
    from app.engine import get_store

    spec = get_store().spec(encoding)
    return LocalSpec(spec.name, Path(spec.artifact_path), spec.pattern, dict(spec.special_tokens))


def tiktoken_engine(encoding: str) -> Engine | Unavailable:
    """tiktoken built from our artifact file (``load_tiktoken_bpe``) and the reference pattern."""
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError as e:
        return Unavailable("tiktoken", encoding, f"not installed ({e})")
    s = local_spec(encoding)
    tokenizer = tiktoken.Encoding(s.name, pat_str=s.pattern, mergeable_ranks=load_tiktoken_bpe(str(s.artifact)),
                            special_tokens=s.special_tokens)

    def batch(texts: Sequence[str], n: int) -> list[list[int]]:
        return tokenizer.encode_ordinary_batch(list(texts), num_threads=n)

    return Engine("tiktoken", encoding, _version("tiktoken"), tokenizer.encode_ordinary, None, batch,
                  note="encode_ordinary; built from our artifact")


# --------------------------------------------------------------------------- Hugging Face tokenizers


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out: dict[int, str] = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Merge rules equivalent to rank-based BPE: for every token, each split into two tokens, ordered by the
    merged token's rank, then by the ranks of the left and right parts."""
    rules: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            lr, rr = ranks.get(left), ranks.get(right)
            if lr is not None and rr is not None:
                rules.append((rank, lr, rr, left, right))
    rules.sort()
    return [(left, right) for _, _, _, left, right in rules]


def hf_pattern(pattern: str) -> str:
    """The reference pattern as Oniguruma (HF's regex engine) reads it the same way.

    Oniguruma parses ``{1,3}+`` as "an interval, repeated" rather than a possessive interval, so cl100k's
    ``\\p{N}{1,3}+`` would swallow whole digit runs. In these patterns the interval ends its alternative, where
    possessive and greedy match the same text, so dropping the ``+`` keeps the reference's splits.
    """
    return pattern.replace("{1,3}+", "{1,3}")


def hf_tokenizer_json(encoding: str, out_dir: Path) -> Path:
    """Write (once per recipe, pattern and artifact) ``out_dir/<encoding>-<key>.tokenizer.json``: byte-level BPE
    with the ranks as ids, merges derived from the ranks, the reference regex (see :func:`hf_pattern`) as an
    isolating ``Split`` pre-tokenizer followed by ``ByteLevel`` without its own regex, and ``ignore_merges``
    (whole-piece lookup first, as tiktoken does). No special tokens: HF would match them inside text, and what is
    timed is plain-text encoding (tiktoken's ``encode_ordinary``)."""
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    s = local_spec(encoding)
    key = hashlib.sha256(f"{HF_RECIPE}\0{hf_pattern(s.pattern)}\0{s.artifact.stat().st_size}".encode()).hexdigest()
    path = out_dir / f"{encoding}-{key[:12]}.tokenizer.json"
    if path.exists():
        return path
    ranks = load_tiktoken_bpe(str(s.artifact))
    b2u = byte_to_unicode()

    def u(b: bytes) -> str:
        return "".join(b2u[x] for x in b)

    vocab = {u(tok): rank for tok, rank in ranks.items()}
    merges = [(u(a), u(b)) for a, b in merges_from_ranks(ranks)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(hf_pattern(s.pattern)), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tok.save(str(tmp))
    tmp.replace(path)
    return path


def hf_engine(encoding: str, cache_dir: Path) -> Engine | Unavailable:
    """Hugging Face ``tokenizers`` loaded from the ``tokenizer.json`` :func:`hf_tokenizer_json` writes."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        return Unavailable("hf-tokenizers", encoding, f"not installed ({e})")
    try:
        tok = Tokenizer.from_file(str(hf_tokenizer_json(encoding, cache_dir)))
    except Exception as e:  # noqa: BLE001
        return Unavailable("hf-tokenizers", encoding, f"could not build tokenizer.json: {type(e).__name__}: {e}")

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    def batch(texts: Sequence[str], n: int) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]

    return Engine("hf-tokenizers", encoding, _version("tokenizers"), encode, None, None,
                  note="tokenizer.json from our ranks; RankBPETokenizer object built per call")


# --------------------------------------------------------------------------- bpe-openai


def bpe_openai_engine(encoding: str) -> Engine | Unavailable:
    """bpe-openai's Rust tokenizer from the data its wheel ships (the raw binding: no Python wrapper work)."""
    try:
        from bpe_openai import _bindings
    except ImportError as e:
        return Unavailable("bpe-openai", encoding, f"not installed ({e})")
    if encoding not in _bindings.supported_encodings():
        return Unavailable("bpe-openai", encoding, f"ships no {encoding} (has {_bindings.supported_encodings()})",
                           _version("bpe-openai"))
    tok = _bindings.tokenizer_for_encoding(encoding)

    def batch(texts: Sequence[str], n: int) -> list[list[int]]:
        if n <= 1:
            return [tok.encode(t) for t in texts]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(tok.encode, texts))

    return Engine("bpe-openai", encoding, _version("bpe-openai"), tok.encode, tok.count, batch,
                  note="_bindings.PyTokenizer (its wheel's own data)")


# --------------------------------------------------------------------------- quicktok


def quicktok_engine(encoding: str) -> Engine | Unavailable:
    """quicktok from the data its wheel ships (PyPI distribution ``quicktok-v1``, imported as ``quicktok``).

    ``encode_ordinary`` is timed (plain text, like ours); ``count`` builds no id list; its batch API returns flat
    numpy arrays (tokens, offsets), which is what the batch benchmark times. The unrelated PyPI distribution
    ``quicktok`` (0.2.0, a minbpe-style ``BasicTokenizer`` without these encodings) is detected and reported.
    """
    try:
        import quicktok
    except ImportError as e:
        return Unavailable("quicktok", encoding, f"not installed ({e}); pip install quicktok-v1")
    version = _version("quicktok-v1") or _version("quicktok")
    if not hasattr(quicktok, "get_encoding"):  # quicktok-v1's API (another "quicktok" lacks it)
        api = sorted(n for n in dir(quicktok) if not n.startswith("_") and n != "quicktok")
        return Unavailable("quicktok", encoding,
                           f"the installed 'quicktok' {version} is not quicktok-v1 (public API: {api}); it has no "
                           f"{encoding} data or pre-tokenizer. Install quicktok-v1", version)
    try:
        tokenizer = quicktok.get_encoding(encoding)
    except Exception as e:  # noqa: BLE001
        return Unavailable("quicktok", encoding, f"quicktok.get_encoding({encoding!r}) failed: {e}", version)

    def batch(texts: Sequence[str], n: int) -> Any:
        return tokenizer.encode_batch(list(texts), n)

    return Engine("quicktok", encoding, version, tokenizer.encode_ordinary, tokenizer.count, batch,
                  note="quicktok-v1 encode_ordinary (its wheel's own data)")


def all_engines(encoding: str, cache_dir: Path, peers: Sequence[str] | None = None) -> list[Engine | Unavailable]:
    """Ours (each backend) then every peer, for ``encoding``. ``peers`` restricts the peers by name."""
    out: list[Engine | Unavailable] = [ours(encoding, b) for b in our_backends()]
    builders: dict[str, Callable[[], Engine | Unavailable]] = {
        "tiktoken": lambda: tiktoken_engine(encoding),
        "hf-tokenizers": lambda: hf_engine(encoding, cache_dir),
        "bpe-openai": lambda: bpe_openai_engine(encoding),
        "quicktok": lambda: quicktok_engine(encoding),
    }
    for name, build in builders.items():
        if peers is None or name in peers:
            out.append(build())
    return out
