"""Benchmark corpora built only from files that pip or apt packages install.

Nothing here downloads at benchmark time. ``build`` reads text that is already on the machine and, once,
downloads three pinned wheels by name from PyPI with ``pip download --no-deps`` (never installed; their
gettext ``.po`` files are read straight out of the zip) into ``bench/.data/cache/wheels``:

* ``Django==5.2.8``, ``Sphinx==9.0.4``, ``wagtail==8.0.1`` — real translated UI sentences (``msgstr``).

Everything else comes from what the interpreter and Debian packages put on disk:

* the running interpreter's standard library (``pydoc_data/topics.py`` prose, ``*.py`` sources, C headers
  from ``sysconfig``'s include dir);
* Debian: ``/usr/share/common-licenses`` (base-files), ``/usr/share/info`` (GNU manuals of coreutils, grep,
  …), ``/usr/share/doc/*/README*|NEWS*`` text, ``/usr/share/locale/<lang>/LC_MESSAGES/*.mo`` (gettext
  catalogues of installed packages), ``/usr/include/**/*.h`` (libc6-dev and friends).

If the wheel download fails (offline, or ``$BENCH_CORPORA_OFFLINE`` is set), the multilingual corpora fall
back to the Debian catalogues alone and the build warns. Given the same interpreter, installed packages and
wheels, every build writes the same bytes: files are read in sorted order, nothing depends on time or hash
seeds, and random sampling uses fixed seeds. ``bench/.data/MANIFEST.json`` records size and sha256 of each
file built.

Corpora (``ensure(name) -> Path``):

``english``       ~640 KiB prose: ``english.txt``
``code``          ~512 KiB source: ``code.txt`` (Python stdlib, then C headers)
``multilingual``  a directory, one ``<lang>.txt`` (<= 256 KiB) per language in ``LANGUAGES``
``chat``          ``chat.json``: a JSON list of 1000 short messages, 100 B – 2 KiB of UTF-8 each, sampled
                  deterministically from the other three
``train``         ``train.txt``: >= 50 MiB of real text (prose, translated UI text, Python and C source) for the
                  BPE-trainer benchmark

Command line: ``python -m bench.corpora build [NAME ...] [--force]`` (default: all) prints a summary.
``HOSTILE`` holds generators ``n -> str`` of adversarial inputs for doubling tests (not files).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from harness.texts import HOSTILE_RUNS

__all__ = [
    "BENCH_CORPORA",
    "DATA_DIR",
    "HOSTILE",
    "LANGUAGES",
    "NAMES",
    "bench_texts",
    "build",
    "ensure",
    "load_chat",
    "main",
]

#: Where corpora are written (gitignored).
DATA_DIR = Path(__file__).resolve().parent / ".data"
#: Bumped whenever the recipe changes, so stale builds are rebuilt by ``ensure``.
RECIPE_VERSION = 2
#: Pinned wheels whose gettext catalogues feed the multilingual corpora (downloaded, never installed).
WHEELS: tuple[str, ...] = ("Django==5.2.8", "Sphinx==9.0.4", "wagtail==8.0.1")

KIB = 1024
MIB = 1024 * KIB
ENGLISH_BYTES = 640 * KIB
CODE_BYTES = 512 * KIB
LANGUAGE_BYTES = 256 * KIB
TRAIN_MIN_BYTES = 50 * MIB
TRAIN_QUOTAS: tuple[tuple[str, int], ...] = (  # (section, max bytes); the total must reach TRAIN_MIN_BYTES
    ("english", 20 * MIB),
    ("multilingual", 18 * MIB),
    ("python", 16 * MIB),
    ("c", 10 * MIB),
)
CHAT_MESSAGES = 1000
CHAT_MIN_BYTES = 100
CHAT_MAX_BYTES = 2048

#: Language key -> (locale directory names in the wheels, names under /usr/share/locale). Ten scripts/languages:
#: Chinese (Han, simplified), Japanese (kana + kanji), Korean (Hangul), Russian (Cyrillic), Arabic, Hindi
#: (Devanagari), Greek, Thai, Hebrew, and German (Latin with diacritics).
LANGUAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "zh": (("zh_Hans", "zh_CN"), ("zh_CN",)),
    "ja": (("ja",), ("ja",)),
    "ko": (("ko",), ("ko",)),
    "ru": (("ru",), ("ru",)),
    "ar": (("ar",), ("ar",)),
    "hi": (("hi",), ("hi",)),
    "el": (("el",), ("el",)),
    "th": (("th",), ("th",)),
    "he": (("he",), ("he",)),
    "de": (("de",), ("de",)),
}

NAMES: tuple[str, ...] = ("english", "code", "multilingual", "chat", "train")
_FILES = {
    "english": "english.txt",
    "code": "code.txt",
    "multilingual": "multilingual",
    "chat": "chat.json",
    "train": "train.txt",
}

# --------------------------------------------------------------------------- sources


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _include_dir() -> Path:
    return Path(sysconfig.get_paths()["include"])


def _read_text(path: Path) -> str:
    """File contents as text: gunzipped if ``*.gz``, UTF-8 with U+FFFD for invalid bytes, ``\\r\\n`` kept."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def _sorted_files(root: Path, pattern: str, exclude: Callable[[Path], bool] = lambda p: False) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted((p for p in root.rglob(pattern) if p.is_file() and not p.is_symlink() and not exclude(p)),
                  key=lambda p: p.as_posix())


def _pydoc_topics() -> Iterator[str]:
    """The interpreter's help-topic texts (the language reference in prose), sorted by topic name."""
    from pydoc_data import topics

    for key in sorted(topics.topics):
        yield topics.topics[key]


def _english_docs() -> Iterator[str]:
    yield from _pydoc_topics()
    for p in _sorted_files(Path("/usr/share/common-licenses"), "*"):
        yield _read_text(p)
    for p in _sorted_files(Path("/usr/share/info"), "*.gz"):
        yield _read_text(p)
    for pattern in ("README*", "NEWS*"):
        for p in _sorted_files(Path("/usr/share/doc"), pattern, lambda p: p.suffix in {".html", ".pdf"}):
            yield _read_text(p)


def _is_test_path(p: Path) -> bool:
    return any(part in {"test", "tests", "idle_test", "site-packages", "__pycache__"} for part in p.parts)


def _python_sources() -> Iterator[str]:
    for p in _sorted_files(_stdlib_dir(), "*.py", _is_test_path):
        yield _read_text(p)


def _c_headers(everything: bool) -> Iterator[str]:
    for p in _sorted_files(_include_dir(), "*.h"):
        yield _read_text(p)
    if everything:
        for p in _sorted_files(Path("/usr/include"), "*.h", lambda p: "python3" in p.as_posix()):
            yield _read_text(p)


# --------------------------------------------------------------------------- gettext catalogues

_PO_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape_po(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: _C_ESCAPES.get(m.group(1), m.group(1)), s)


def parse_po_msgstrs(text: str) -> list[str]:
    """Translated strings (``msgstr`` and ``msgstr[n]``) of a ``.po`` file in file order, header and empty
    translations skipped, continuation lines joined, C escapes resolved."""
    out: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("msgstr"):
            if current:
                out.append("".join(current))
            m = _PO_STRING.search(line)
            current = [_unescape_po(m.group(1))] if m else []
        elif line.startswith('"') and current is not None:
            m = _PO_STRING.match(line)
            if m:
                current.append(_unescape_po(m.group(1)))
        else:
            if current:
                out.append("".join(current))
            current = None
    if current:
        out.append("".join(current))
    return [s for s in out if s and not s.startswith("Project-Id-Version") and "Content-Type:" not in s]


def parse_mo_msgstrs(data: bytes) -> list[str]:
    """Translated strings of a GNU ``.mo`` catalogue in table order (plural forms split), header skipped.

    Decodes with the charset the header names (UTF-8 if none). Raises ``ValueError`` on a malformed file.
    """
    if len(data) < 28:
        raise ValueError("too short for a .mo file")
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if endian is None:
        raise ValueError("bad .mo magic")
    _rev, n, _orig_off, trans_off = struct.unpack(endian + "4I", data[4:20])
    raw: list[bytes] = []
    for i in range(n):
        length, off = struct.unpack(endian + "2I", data[trans_off + 8 * i: trans_off + 8 * i + 8])
        raw.append(data[off: off + length])
    charset = "utf-8"
    if raw and b"Content-Type:" in raw[0]:
        m = re.search(rb"charset=([A-Za-z0-9_-]+)", raw[0])
        if m:
            charset = m.group(1).decode("ascii")
        raw = raw[1:]
    try:
        "".encode(charset)
    except LookupError:
        charset = "utf-8"
    out: list[str] = []
    for chunk in raw:
        for s in chunk.split(b"\0"):
            if s:
                out.append(s.decode(charset, errors="replace"))
    return out


def _wheel_dir(data_dir: Path) -> Path:
    return data_dir / "cache" / "wheels"


def fetch_wheels(data_dir: Path = DATA_DIR) -> list[Path]:
    """Download the pinned ``WHEELS`` (``pip download --no-deps --only-binary=:all:``) unless cached.

    Returns the wheel paths present afterwards (empty if pip could not reach the registry). With
    ``$BENCH_CORPORA_OFFLINE`` set, never runs pip (tests use this).
    """
    wd = _wheel_dir(data_dir)
    wd.mkdir(parents=True, exist_ok=True)

    def present() -> list[Path]:
        found = []
        for spec in WHEELS:
            name, version = spec.split("==")
            found += sorted(wd.glob(f"{name.lower()}-{version}-*.whl"))
        return found

    if len(present()) < len(WHEELS) and not os.environ.get("BENCH_CORPORA_OFFLINE"):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wd),
               *WHEELS]
        print("+ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=False)
    return present()


def _wheel_catalogues(wheels: list[Path], locales: tuple[str, ...]) -> Iterator[str]:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            names = sorted(n for n in z.namelist() if n.endswith(".po") and "/LC_MESSAGES/" in n)
            for loc in locales:
                for n in names:
                    if f"/locale/{loc}/LC_MESSAGES/" in n:
                        yield from parse_po_msgstrs(z.read(n).decode("utf-8", errors="replace"))


def _debian_catalogues(locales: tuple[str, ...]) -> Iterator[str]:
    for loc in locales:
        for p in _sorted_files(Path("/usr/share/locale") / loc / "LC_MESSAGES", "*.mo"):
            try:
                yield from parse_mo_msgstrs(p.read_bytes())
            except (ValueError, struct.error):
                continue


def _language_text(lang: str, wheels: list[Path], limit: int) -> str:
    wheel_locales, debian_locales = LANGUAGES[lang]
    seen: set[str] = set()

    def unique() -> Iterator[str]:
        for s in _wheel_catalogues(wheels, wheel_locales):
            if s not in seen:
                seen.add(s)
                yield s
        for s in _debian_catalogues(debian_locales):
            if s not in seen:
                seen.add(s)
                yield s

    return _take(unique(), limit, sep="\n")


# --------------------------------------------------------------------------- assembly helpers


def _take(chunks: Iterable[str], limit: int, sep: str = "\n\n") -> str:
    """Join ``chunks`` with ``sep`` up to ``limit`` UTF-8 bytes; the last chunk is cut at a line boundary."""
    out: list[str] = []
    size = 0
    for chunk in chunks:
        b = len(chunk.encode("utf-8")) + len(sep)
        if size + b <= limit:
            out.append(chunk)
            size += b
            continue
        room = limit - size - len(sep)
        lines, part = [], 0
        for line in chunk.splitlines(keepends=True):
            lb = len(line.encode("utf-8"))
            if part + lb > room:
                break
            lines.append(line)
            part += lb
        if lines:
            out.append("".join(lines))
        break
    return sep.join(out)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # per process: concurrent builders never collide
    tmp.write_bytes(text.encode("utf-8"))
    tmp.replace(path)


# --------------------------------------------------------------------------- builders


def _build_english(data_dir: Path) -> None:
    _write(data_dir / _FILES["english"], _take(_english_docs(), ENGLISH_BYTES))


def _build_code(data_dir: Path) -> None:
    py = _take(_python_sources(), CODE_BYTES * 3 // 4)
    c = _take(_c_headers(everything=False), CODE_BYTES - len(py.encode("utf-8")) - 2)
    _write(data_dir / _FILES["code"], py + "\n\n" + c)


def _build_multilingual(data_dir: Path) -> None:
    wheels = fetch_wheels(data_dir)
    if len(wheels) < len(WHEELS):
        print(f"warning: only {len(wheels)}/{len(WHEELS)} pinned wheels available; multilingual corpora use "
              "Debian catalogues instead (output differs from a networked build)", file=sys.stderr)
    out = data_dir / _FILES["multilingual"]
    for lang in LANGUAGES:
        _write(out / f"{lang}.txt", _language_text(lang, wheels, LANGUAGE_BYTES))


def _cut_message(text: str, rng: random.Random) -> str | None:
    """A window of ``text`` of 100..2048 UTF-8 bytes starting at a line start, or None if none fits."""
    # log-uniform length: as many messages of 100-200 B as of 1-2 KiB, like real chat traffic
    target = int(math.exp(rng.uniform(math.log(CHAT_MIN_BYTES), math.log(CHAT_MAX_BYTES))))
    start = rng.randrange(len(text))
    nl = text.find("\n", start)
    if nl < 0:
        return None
    start = nl + 1
    msg = text[start: start + target]
    while len(msg.encode("utf-8")) > CHAT_MAX_BYTES:
        msg = msg[: len(msg) * 3 // 4]
    # end at the last sentence or line break when there is one in the second half
    cut = max(msg.rfind(". "), msg.rfind("\n"), msg.rfind("。"))
    if cut > len(msg) // 2:
        msg = msg[: cut + 1]
    msg = msg.strip("\n")
    return msg if CHAT_MIN_BYTES <= len(msg.encode("utf-8")) <= CHAT_MAX_BYTES else None


def _build_chat(data_dir: Path) -> None:
    sources = [ensure("english", data_dir).read_text("utf-8"), ensure("code", data_dir).read_text("utf-8")]
    ml = ensure("multilingual", data_dir)
    sources += [(ml / f"{lang}.txt").read_text("utf-8") for lang in LANGUAGES]
    weights = [6, 2] + [1] * len(LANGUAGES)  # mostly English, like real chat traffic
    rng = random.Random(20261129)
    msgs: list[str] = []
    while len(msgs) < CHAT_MESSAGES:
        text = rng.choices(sources, weights)[0]
        msg = _cut_message(text, rng)
        if msg is not None:
            msgs.append(msg)
    _write(data_dir / _FILES["chat"], json.dumps(msgs, ensure_ascii=False, indent=0) + "\n")


def _build_train(data_dir: Path) -> None:
    wheels = fetch_wheels(data_dir)
    seen: set[str] = set()

    def all_translations() -> Iterator[str]:
        locales = sorted(p.name for p in Path("/usr/share/locale").iterdir()) if Path("/usr/share/locale").is_dir() \
            else []
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as z:
                for n in sorted(z.namelist()):
                    if n.endswith(".po") and "/LC_MESSAGES/" in n:
                        yield from parse_po_msgstrs(z.read(n).decode("utf-8", errors="replace"))
        yield from _debian_catalogues(tuple(locales))

    def unique(it: Iterable[str]) -> Iterator[str]:
        for s in it:
            if s not in seen:
                seen.add(s)
                yield s

    sources: dict[str, Callable[[], Iterable[str]]] = {
        "english": _english_docs,
        "multilingual": lambda: ["\n".join(unique(all_translations()))],
        "python": _python_sources,
        "c": lambda: _c_headers(everything=True),
    }
    path = data_dir / _FILES["train"]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    total = 0
    with tmp.open("wb") as f:
        for section, quota in TRAIN_QUOTAS:
            data = _take(sources[section](), quota).encode("utf-8") + b"\n\n"
            f.write(data)
            total += len(data)
    if total < TRAIN_MIN_BYTES:
        tmp.unlink()
        raise RuntimeError(f"train corpus only {total} bytes (< {TRAIN_MIN_BYTES}): this machine lacks the Debian "
                           "docs, locales or headers it is built from")
    tmp.replace(path)


_BUILDERS: dict[str, Callable[[Path], None]] = {
    "english": _build_english,
    "code": _build_code,
    "multilingual": _build_multilingual,
    "chat": _build_chat,
    "train": _build_train,
}

# --------------------------------------------------------------------------- public API


def _stamp(data_dir: Path, name: str) -> Path:
    return data_dir / f".{name}.built"


def _files_of(path: Path) -> list[Path]:
    return sorted(path.glob("*.txt")) if path.is_dir() else [path]


def _record(data_dir: Path, name: str) -> list[dict[str, object]]:
    rows = []
    for p in _files_of(data_dir / _FILES[name]):
        data = p.read_bytes()
        rows.append({"corpus": name, "file": p.relative_to(data_dir).as_posix(), "bytes": len(data),
                     "sha256": hashlib.sha256(data).hexdigest()})
    manifest_path = data_dir / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest[name] = {"recipe": RECIPE_VERSION, "python": sys.version.split()[0], "files": rows}
    _write(manifest_path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return rows


def ensure(name: str, data_dir: Path | None = None, *, force: bool = False) -> Path:
    """Path of corpus ``name`` (a file, or for ``multilingual`` a directory), building it first if missing,
    stale (older recipe) or ``force``.

    Stable API: ``ensure("train")`` returns a UTF-8 text file of at least 50 MiB. Raises ``KeyError`` for an
    unknown name and ``RuntimeError`` if the machine lacks the source files to reach the required size.
    """
    if name not in _BUILDERS:
        raise KeyError(f"unknown corpus {name!r}; known: {', '.join(NAMES)}")
    data_dir = Path(data_dir) if data_dir is not None else DATA_DIR
    path = data_dir / _FILES[name]
    stamp = _stamp(data_dir, name)
    if force or not path.exists() or not stamp.exists() or stamp.read_text().strip() != str(RECIPE_VERSION):
        data_dir.mkdir(parents=True, exist_ok=True)
        _BUILDERS[name](data_dir)
        _record(data_dir, name)
        stamp.write_text(f"{RECIPE_VERSION}\n")
    return path


def build(names: Iterable[str] = NAMES, data_dir: Path | None = None, *, force: bool = False
          ) -> list[dict[str, object]]:
    """Build (or reuse) the named corpora; returns manifest rows (corpus, file, bytes, sha256)."""
    data_dir = Path(data_dir) if data_dir is not None else DATA_DIR
    rows: list[dict[str, object]] = []
    for name in names:
        ensure(name, data_dir, force=force)
        rows += _record(data_dir, name)
    return rows


def load_chat(data_dir: Path | None = None) -> list[str]:
    """The chat corpus: a list of short messages (100 B – 2 KiB of UTF-8 each)."""
    return list(json.loads(ensure("chat", data_dir).read_text("utf-8")))


#: Corpora timed by the engine benchmark, in report order.
BENCH_CORPORA: tuple[str, ...] = ("english", "code", *(f"ml-{lang}" for lang in LANGUAGES))


def bench_texts(data_dir: Path | None = None, max_bytes: int | None = None) -> dict[str, str]:
    """Benchmark texts by name (``english``, ``code``, ``ml-<lang>``), each cut to ``max_bytes`` UTF-8 bytes
    on a line boundary when given."""
    out: dict[str, str] = {}
    for name in BENCH_CORPORA:
        if name.startswith("ml-"):
            path = ensure("multilingual", data_dir) / f"{name[3:]}.txt"
        else:
            path = ensure(name, data_dir)
        text = path.read_text("utf-8")
        out[name] = _take([text], max_bytes) if max_bytes is not None else text
    return out


# --------------------------------------------------------------------------- hostile inputs


#: Adversarial inputs for doubling tests: name -> (n -> a string of n characters) (:data:`harness.texts.HOSTILE_RUNS`,
#: shared with the tests).
HOSTILE: dict[str, Callable[[int], str]] = HOSTILE_RUNS

# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.corpora build [NAME ...] [--force] [--data-dir DIR]``; prints a size/sha256 summary."""
    ap = argparse.ArgumentParser(prog="python -m bench.corpora", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build corpora (all by default) and print sizes and sha256")
    b.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(NAMES)}")
    b.add_argument("--force", action="store_true", help="rebuild even if present")
    b.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    names = args.names or list(NAMES)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        ap.error(f"unknown corpus {unknown[0]!r}; known: {', '.join(NAMES)}")
    rows = build(names, args.data_dir, force=args.force)
    print(f"{'corpus':<13} {'file':<28} {'bytes':>10}  sha256")
    for r in rows:
        print(f"{r['corpus']:<13} {r['file']:<28} {r['bytes']:>10}  {r['sha256']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
