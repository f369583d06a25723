"""The peer libraries and the reference of each bundled tokenizer, as loaders of fresh instances.

Each :class:`Peer` records its PyPI distribution, installed version and the exact offline loading call (as text,
``{file}`` standing for the artifact path :mod:`bench.peers.artifacts` writes); ``load()`` builds a fresh instance
and returns its plain-text encode (no special tokens matched, none added), whose ids are what the benchmark compares
and times. Where a library returns something other than a list of ids (a numpy array, an ``Encoding`` object), the
encode returns that and :func:`as_ids` converts it for the exactness check only, so the timed call is the library's
own. A library that is not installed, or has no way to load a tokenizer, is a :class:`Missing` with the reason.

Loading calls follow each library's own stubs and docstrings (``fastokens/_native.pyi``, ``gigatoken/_tokenizer.py``,
``splintr/_core.pyi``, ``kitoken/__init__.pyi``, ``tokie/__init__.pyi``, ``quicktok/__init__.py``,
``toktok/__init__.py`` in their wheels).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, cast

from bench.peers.artifacts import Artifacts

Encode = Callable[[str], Any]

#: PyPI distributions of the libraries, in report order (the references first).
LIBRARIES = ("tiktoken", "tokenizers", "sentencepiece", "mistral-common", "fastokens", "toktok-rs", "gigatoken",
             "splintr-rs", "kitoken", "tokie", "quicktok-v1")

#: Bundled tokenizers measured by default, in report order.
TOKENIZERS = ("o200k_base", "cl100k_base", "qwen3", "qwen2", "deepseek-v3", "gemma3", "llama3", "mistral-v1",
              "llama2", "phi-3", "mistral-nemo", "bge-small-en-v1.5", "gpt2")

#: The reference library of each tokenizer (the library whose ids ours reproduce).
REFERENCE = {
    "o200k_base": "tiktoken", "cl100k_base": "tiktoken", "llama3": "tiktoken", "gpt2": "tiktoken",
    "qwen3": "tokenizers", "qwen2": "tokenizers", "deepseek-v3": "tokenizers", "gemma3": "tokenizers",
    "bge-small-en-v1.5": "tokenizers", "mistral-v1": "sentencepiece", "llama2": "sentencepiece",
    "phi-3": "sentencepiece", "mistral-nemo": "mistral-common",
}

#: Encodings compiled into toktok-rs and quicktok-v1 (their wheels' own data; checked against the reference).
TOKTOK_BUILTIN = {"o200k_base": "o200k_base", "cl100k_base": "cl100k_base"}
QUICKTOK_BUILTIN = {"o200k_base": "o200k_base", "cl100k_base": "cl100k_base", "llama3": "llama3", "qwen3": "qwen3",
                    "qwen2": "qwen3"}
#: gigatoken's pre-tokenizer scheme names for rank files (``Tokenizer.from_tiktoken(path, pretokenizer=...)``).
GIGATOKEN_SCHEME = {"o200k_base": "o200k", "cl100k_base": "gpt4", "gpt2": "gpt2", "llama3": "gpt4"}
#: splintr's own pattern constants for rank files (``splintr.Tokenizer(path, pattern, specials)``).
SPLINTR_PATTERN = {"o200k_base": "O200K_BASE_PATTERN", "cl100k_base": "CL100K_BASE_PATTERN",
                   "llama3": "LLAMA3_PATTERN", "gpt2": "GPT2_PATTERN"}


@dataclass(frozen=True)
class Peer:
    """A library that can load one tokenizer: ``load()`` -> a fresh instance's encode."""

    library: str
    version: str
    call: str
    load: Callable[[], Encode]


@dataclass(frozen=True)
class Missing:
    """A library that cannot be measured on one tokenizer, and why."""

    library: str
    version: str
    reason: str


def version(dist: str) -> str:
    """The installed version of a distribution, or "" when it is not installed."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def as_ids(out: Any) -> list[int]:
    """A library's encode result as a list of ints (``list``, numpy array, or an object with ``.ids``)."""
    if isinstance(out, list):
        return out
    if hasattr(out, "ids"):
        return list(out.ids)
    if hasattr(out, "tolist"):
        return list(out.tolist())
    return [int(x) for x in out]


def ours(name: str) -> Peer:
    """Our tokenizer: a fresh instance from the store each time (``registry.load_encoding``, not memoised)."""
    from app.engine.registry import get_store, load_encoding

    def load() -> Encode:
        return load_encoding(get_store().spec(name)).encode

    return Peer("ours", "work tree", f"app.engine.registry.load_encoding(get_store().spec({name!r})).encode", load)


# --------------------------------------------------------------------------- one builder per library


def _tiktoken(name: str, a: Artifacts) -> Peer | Missing:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    if a.fmt(name) == "tiktoken":
        path, pattern, specials = a.tiktoken(name), a.pattern(name), a.special_tokens(name)

        def load() -> Encode:
            return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                     special_tokens=specials).encode_ordinary

        return Peer("tiktoken", version("tiktoken"), "tiktoken.Encoding(name, pat_str=<store pattern>, mergeable_ranks="
                    "load_tiktoken_bpe('{file}.tiktoken'), special_tokens=<store specials>).encode_ordinary", load)
    if a.fmt(name) == "tekken":
        tpath, tpattern, offset = a.tekken_ranks(name)

        def load_tekken() -> Encode:
            tokenizer = tiktoken.Encoding(name, pat_str=tpattern, mergeable_ranks=load_tiktoken_bpe(str(tpath)),
                                    special_tokens={})
            return lambda text: [i + offset for i in tokenizer.encode_ordinary(text)]

        return Peer("tiktoken", version("tiktoken"), "tiktoken.Encoding(name, pat_str=config.pattern, mergeable_ranks="
                    "<tekken vocab>, special_tokens={}).encode_ordinary, ids + 1000 in Python (as mistral-common "
                    "does)", load_tekken)
    return Missing("tiktoken", version("tiktoken"), "not a rank-file tokenizer")


def _tokenizers(name: str, a: Artifacts) -> Peer | Missing:
    from tokenizers import Tokenizer

    if a.fmt(name) == "tekken":
        return Missing("tokenizers", version("tokenizers"), "no tekken loader")
    path = str(a.tokenizer_json(name))

    def load() -> Encode:
        tok = Tokenizer.from_file(path)
        tok.encode_special_tokens = True  # plain text: added tokens' strings are text
        return lambda text: tok.encode(text, add_special_tokens=False).ids

    return Peer("tokenizers", version("tokenizers"), "tokenizers.Tokenizer.from_file('{file}.tokenizer.json')"
                ".encode(text, add_special_tokens=False).ids", load)


def _sentencepiece(name: str, a: Artifacts) -> Peer | Missing:
    import sentencepiece as spm

    if a.fmt(name) not in ("sentencepiece", "gguf") or name in ("qwen2", "bge-small-en-v1.5"):
        return Missing("sentencepiece", version("sentencepiece"), "not a SentencePiece model")
    path = str(a.sentencepiece_model(name))
    return Peer("sentencepiece", version("sentencepiece"),
                "sentencepiece.SentencePieceProcessor(model_file='{file}.model').encode",
                lambda: spm.SentencePieceProcessor(model_file=path).encode)


def _mistral_common(name: str, a: Artifacts) -> Peer | Missing:
    if a.fmt(name) != "tekken":
        return Missing("mistral-common", version("mistral-common"), "not a tekken file")
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    path = a.tekken(name)

    def load() -> Encode:
        tk = Tekkenizer.from_file(path)
        return lambda text: tk.encode(text, bos=False, eos=False)

    return Peer("mistral-common", version("mistral-common"),
                "Tekkenizer.from_file('{file}.tekken.json').encode(text, bos=False, eos=False)", load)


def fastokens_tokenizer(name: str, a: Artifacts) -> tuple[str, Callable[[], Any]] | Missing:
    """fastokens' loading call for ``name`` (as text) and a loader of a fresh ``fastokens.Tokenizer`` whose ids are
    the bundled tokenizer's as they are (for its batch API, :mod:`bench.peers.batch`): a rank file or a
    ``tokenizer.json``; Missing for tekken, whose ids fastokens gives 1000 lower (the offset is added in Python),
    and when fastokens is not installed (the test extra does not have it; the bench extra does)."""
    try:
        import fastokens
    except ImportError:
        return Missing("fastokens", "", "not installed (pip install -e '.[bench]')")

    if a.fmt(name) == "tiktoken":
        path, pattern, specials = str(a.tiktoken(name)), a.pattern(name), a.special_tokens(name)
        return ("fastokens.Tokenizer.from_tiktoken('{file}.tiktoken', pattern=<store pattern>, "
                "special_tokens=<store specials>)",
                lambda: fastokens.Tokenizer.from_tiktoken(path, pattern=pattern, special_tokens=specials))
    if a.fmt(name) == "tekken":
        return Missing("fastokens", version("fastokens"), "tekken: ids offset by 1000 in Python")
    file = str(a.tokenizer_json(name))
    return "fastokens.Tokenizer.from_file('{file}.tokenizer.json')", lambda: fastokens.Tokenizer.from_file(file)


def _fastokens(name: str, a: Artifacts) -> Peer | Missing:
    import fastokens

    if a.fmt(name) == "tiktoken":
        call, load = cast("tuple[str, Callable[[], Any]]", fastokens_tokenizer(name, a))
        return Peer("fastokens", version("fastokens"), f"{call}.encode_ordinary(text).ids",
                    lambda: _ids_attr(load().encode_ordinary))
    if a.fmt(name) == "tekken":
        tpath, tpattern, offset = a.tekken_ranks(name)

        def load_tekken() -> Encode:
            tokenizer = fastokens.Tokenizer.from_tiktoken(str(tpath), pattern=tpattern, special_tokens={})
            encode = tokenizer.encode_ordinary
            return lambda text: [i + offset for i in encode(text).ids]

        return Peer("fastokens", version("fastokens"), "fastokens.Tokenizer.from_tiktoken('{file}.tekken.tiktoken', "
                    "pattern=config.pattern, special_tokens={}).encode_ordinary(text).ids, ids + 1000 in Python",
                    load_tekken)
    path = str(a.tokenizer_json(name))
    return Peer("fastokens", version("fastokens"), "fastokens.Tokenizer.from_file('{file}.tokenizer.json')"
                ".encode(text, add_special_tokens=False, split_special_tokens=True).ids",
                lambda: _split_specials(fastokens.Tokenizer.from_file(path)))


def _ids_attr(encode: Callable[[str], Any]) -> Encode:
    return lambda text: encode(text).ids


def _split_specials(tok: Any) -> Encode:
    return lambda text: tok.encode(text, add_special_tokens=False, split_special_tokens=True).ids


def _toktok(name: str, a: Artifacts) -> Peer | Missing:
    from toktok._toktok import Tokenizer

    if name not in TOKTOK_BUILTIN:
        return Missing("toktok-rs", version("toktok-rs"), "compiles in only cl100k_base, o200k_base, o200k_harmony, "
                       "qwen3.5 (a different vocabulary from qwen3); loads no file")
    tokenizer = TOKTOK_BUILTIN[name]
    return Peer("toktok-rs", version("toktok-rs"), f"toktok._toktok.Tokenizer({tokenizer!r}, '').encode_ordinary "
                "(the class toktok._encoding() caches; compiled-in data)",
                lambda: Tokenizer(tokenizer, "").encode_ordinary)


def _gigatoken(name: str, a: Artifacts) -> Peer | Missing:
    import gigatoken

    fmt = a.fmt(name)
    if fmt == "tiktoken":
        path, scheme = str(a.tiktoken(name)), GIGATOKEN_SCHEME[name]
        return Peer("gigatoken", version("gigatoken"), f"gigatoken.Tokenizer.from_tiktoken('{{file}}.tiktoken', "
                    f"pretokenizer={scheme!r}, special_tokens={{}}).encode (numpy uint32)",
                    lambda: gigatoken.Tokenizer.from_tiktoken(path, pretokenizer=scheme, special_tokens={}).encode)
    if fmt == "tekken":
        return Missing("gigatoken", version("gigatoken"), "no tekken loader, and its rank-file loader knows no "
                       "tekken pre-tokenizer scheme")
    if name in ("mistral-v1", "llama2", "phi-3"):
        path = str(a.sentencepiece_model(name))
        return Peer("gigatoken", version("gigatoken"), "gigatoken.Tokenizer.from_sentencepiece('{file}.model')"
                    ".encode (numpy uint32)", lambda: gigatoken.Tokenizer.from_sentencepiece(path).encode)
    jpath = str(a.tokenizer_json(name))
    return Peer("gigatoken", version("gigatoken"), "gigatoken.Tokenizer('{file}.tokenizer.json').encode "
                "(numpy uint32)", lambda: gigatoken.Tokenizer(jpath).encode)


def _splintr(name: str, a: Artifacts) -> Peer | Missing:
    import splintr

    fmt = a.fmt(name)
    if fmt == "tiktoken":
        # its regex engine rejects the possessive quantifiers of the reference patterns: its own constants
        path, const = str(a.tiktoken(name)), SPLINTR_PATTERN[name]
        pattern = getattr(splintr, const)
        return Peer("splintr-rs", version("splintr-rs"),
                    f"splintr.Tokenizer('{{file}}.tiktoken', splintr.{const}, {{}}).encode_ordinary",
                    lambda: splintr.Tokenizer(path, pattern, {}).encode_ordinary)
    if fmt == "tekken":
        tpath, tpattern, offset = a.tekken_ranks(name)

        def load_tekken() -> Encode:
            tokenizer = splintr.Tokenizer(str(tpath), tpattern, {}).encode_ordinary
            return lambda text: [i + offset for i in tokenizer(text)]

        return Peer("splintr-rs", version("splintr-rs"), "splintr.Tokenizer('{file}.tekken.tiktoken', config.pattern"
                    ", {}).encode_ordinary, ids + 1000 in Python", load_tekken)
    path = str(a.tokenizer_json(name))
    # encode_raw: no BOS (encode_ordinary adds gemma3's)
    return Peer("splintr-rs", version("splintr-rs"), "splintr.from_json('{file}.tokenizer.json').encode_raw",
                lambda: splintr.from_json(path).encode_raw)


def _kitoken(name: str, a: Artifacts) -> Peer | Missing:
    from kitoken import Kitoken

    fmt = a.fmt(name)
    if fmt == "tiktoken":
        path = str(a.tiktoken(name))
        return Peer("kitoken", version("kitoken"), "kitoken.Kitoken.from_tiktoken_file('{file}.tiktoken').encode"
                    "(text)", lambda: Kitoken.from_tiktoken_file(path).encode)
    if fmt == "tekken":
        tpath = str(a.tekken(name))
        return Peer("kitoken", version("kitoken"), "kitoken.Kitoken.from_tekken_file('{file}.tekken.json').encode"
                    "(text)", lambda: Kitoken.from_tekken_file(tpath).encode)
    if name in ("mistral-v1", "llama2", "phi-3"):
        spath = str(a.sentencepiece_model(name))
        return Peer("kitoken", version("kitoken"), "kitoken.Kitoken.from_sentencepiece_file('{file}.model').encode"
                    "(text)", lambda: Kitoken.from_sentencepiece_file(spath).encode)
    jpath = str(a.tokenizer_json(name))
    return Peer("kitoken", version("kitoken"), "kitoken.Kitoken.from_tokenizers_file('{file}.tokenizer.json')"
                ".encode(text)", lambda: Kitoken.from_tokenizers_file(jpath).encode)


def _tokie(name: str, a: Artifacts) -> Peer | Missing:
    import tokie

    if a.fmt(name) == "tekken":
        return Missing("tokie", version("tokie"), "no tekken or rank-file loader")
    path = str(a.tokenizer_json(name))

    def load() -> Encode:
        tok = tokie.Tokenizer.from_json(path)
        return lambda text: tok.encode(text, add_special_tokens=False).ids

    return Peer("tokie", version("tokie"), "tokie.Tokenizer.from_json('{file}.tokenizer.json').encode(text, "
                "add_special_tokens=False).ids", load)


def _quicktok(name: str, a: Artifacts) -> Peer | Missing:
    import quicktok

    if not hasattr(quicktok, "get_encoding"):  # quicktok-v1's API (another "quicktok" lacks it)
        return Missing("quicktok-v1", version("quicktok-v1"), "the installed quicktok is not quicktok-v1")
    if name not in QUICKTOK_BUILTIN:
        return Missing("quicktok-v1", version("quicktok-v1"), "bundles only cl100k_base, o200k_base, o200k_harmony, "
                       "llama3, qwen3; others need quicktok.import_tokenizer into a user data directory (not tried)")
    tokenizer = QUICKTOK_BUILTIN[name]
    return Peer("quicktok-v1", version("quicktok-v1"),
                f"quicktok.Tokenizer({tokenizer!r}, '').encode_ordinary (the class "
                "quicktok.get_encoding() caches; its wheel's data)",
                lambda: quicktok.Tokenizer(tokenizer, "").encode_ordinary)


BUILDERS: dict[str, Callable[[str, Artifacts], Peer | Missing]] = {
    "tiktoken": _tiktoken, "tokenizers": _tokenizers, "sentencepiece": _sentencepiece,
    "mistral-common": _mistral_common, "fastokens": _fastokens, "toktok-rs": _toktok, "gigatoken": _gigatoken,
    "splintr-rs": _splintr, "kitoken": _kitoken, "tokie": _tokie, "quicktok-v1": _quicktok,
}


def candidates(name: str, a: Artifacts, libraries: Sequence[str] = LIBRARIES) -> list[Peer | Missing]:
    """Every library of ``libraries`` for tokenizer ``name``: a :class:`Peer`, or :class:`Missing` when the
    library is not installed (its import fails) or cannot load the tokenizer."""
    out: list[Peer | Missing] = []
    for lib in libraries:
        try:
            out.append(BUILDERS[lib](name, a))
        except ImportError as e:
            out.append(Missing(lib, version(lib), f"not installed ({e})"))
    return out
