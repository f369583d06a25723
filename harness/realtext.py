"""(e) Real text in many languages and forms, from files this machine already has: no downloads at test time.

Always available (shipped by the interpreter or by the test dependencies' own requirements):

* ``pydoc_data/topics.py`` — the Python reference documentation (English prose with code and reST markup);
* Python source code — a fixed list of standard-library modules and this project's ``app/`` package;
* ``pygments/lexers/testing.py`` (pytest requires pygments) — Gherkin keywords in ~70 natural languages;
* ``charset_normalizer/constant.py`` (requests, which tiktoken requires) — letter-frequency tables of ~40
  languages in their own scripts;
* ``certifi/cacert.pem`` — certificate authority names in several languages, base64 bodies.

Used when present (operating-system packages; often absent from slim container images):

* GNU gettext catalogues ``/usr/share/locale/*/LC_MESSAGES/*.mo`` — real translated messages in dozens of
  languages and scripts (a deterministic sample);
* the standard library's test data ``test/cjkencodings/*-utf8.txt`` (Chinese, Japanese, Korean prose).
"""

from __future__ import annotations

import gettext
import importlib.util
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
STDLIB = Path(sysconfig.get_paths()["stdlib"])

STDLIB_MODULES = [
    "argparse.py", "typing.py", "inspect.py", "dataclasses.py", "json/decoder.py", "http/client.py",
    "email/message.py", "unittest/case.py", "asyncio/base_events.py", "re/_parser.py", "textwrap.py",
    "locale.py", "encodings/idna.py", "unicodedata.py", "string.py", "difflib.py",
]  # fmt: skip

#: At most this many gettext catalogues (spread over languages), and this many messages from each.
MAX_CATALOGUES = 160
MAX_MESSAGES = 60


@dataclass(frozen=True)
class Document:
    """One real text: where it came from (a label) and its content."""

    source: str
    name: str
    text: str


def _module_file(module: str, relative: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations and spec.origin is None:
        return None
    base = Path(spec.origin).parent if spec.origin else Path(next(iter(spec.submodule_search_locations or [])))
    path = base / relative
    return path if path.is_file() else None


def always_available() -> Iterator[Document]:
    """The documents every test environment has (see the module docstring)."""
    topics = STDLIB / "pydoc_data" / "topics.py"
    if topics.is_file():
        yield Document("pydoc", "pydoc_data/topics.py", topics.read_text("utf-8"))
    for rel in STDLIB_MODULES:
        path = STDLIB / rel
        if path.is_file():
            yield Document("python_source", rel, path.read_text("utf-8"))
    for path in sorted((REPO_ROOT / "app").rglob("*.py")):
        yield Document("python_source", str(path.relative_to(REPO_ROOT)), path.read_text("utf-8"))
    for module, rel, label in [
        ("pygments", "lexers/testing.py", "gherkin_keywords"),
        ("charset_normalizer", "constant.py", "letter_tables"),
        ("certifi", "cacert.pem", "certificates"),
    ]:
        found = _module_file(module, rel)
        if found is not None:
            yield Document(label, f"{module}/{rel}", found.read_text("utf-8"))


def gettext_catalogues(root: Path = Path("/usr/share/locale")) -> Iterator[Document]:
    """Translated messages from a deterministic sample of ``.mo`` catalogues, one document per catalogue."""
    if not root.is_dir():
        return
    files = sorted(root.glob("*/LC_MESSAGES/*.mo"))
    by_language: dict[str, list[Path]] = {}
    for path in files:
        by_language.setdefault(path.parts[-3], []).append(path)
    picked: list[Path] = []
    rounds = max((len(v) for v in by_language.values()), default=0)
    for i in range(rounds):  # round-robin over languages, so the sample spans as many scripts as possible
        for language in sorted(by_language):
            if i < len(by_language[language]) and len(picked) < MAX_CATALOGUES:
                picked.append(by_language[language][i])
    for path in picked:
        try:
            with path.open("rb") as fh:
                catalogue = gettext.GNUTranslations(fh)
        except (OSError, UnicodeDecodeError, gettext.error) as exc:  # type: ignore[attr-defined]
            del exc
            continue
        messages = [m for m in catalogue._catalog.values() if isinstance(m, str) and m]  # type: ignore[attr-defined]
        if messages:
            yield Document("gettext", str(path.relative_to(root)), "\n".join(sorted(messages)[:MAX_MESSAGES]))


def cjk_test_data() -> Iterator[Document]:
    """The standard library's CJK codec test texts (UTF-8 versions), when the test package is installed."""
    for path in sorted((STDLIB / "test" / "cjkencodings").glob("*-utf8.txt")):
        yield Document("cjk_testdata", path.name, path.read_bytes().decode("utf-8", "replace"))


def documents() -> list[Document]:
    """Every real document this machine offers."""
    return [*always_available(), *gettext_catalogues(), *cjk_test_data()]


def strings(doc: Document) -> list[str]:
    """The strings compared for one document: the whole text and each of its paragraphs and lines."""
    paragraphs = [p for p in doc.text.split("\n\n") if p]
    lines = [line for line in doc.text.splitlines(keepends=True) if line.strip()]
    return [doc.text, *paragraphs, *lines]
