"""The pages (app/api/routes/pages.py) over HTTP: the playground and the docs are served from package files, with a
Content-Security-Policy, reference no other host, and the vendored files are the recorded ones (sha256, licences,
package data). The browser-driven checks are in test_pages_browser.py."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tomllib
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import anyio
import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.api.routes.pages import DOCS_CSP, PAGE_CSP, STATIC_DIR
from app.core.config import Settings
from tests.conftest import REPO_ROOT

PAGES = ("/", "/docs", "/redoc", "/docs/oauth2-redirect")
VENDOR = STATIC_DIR / "vendor"
TOKEN = "pages-test-token-1234"
#: Absolute URLs (scheme or scheme-relative): none may appear in our own pages, styles and scripts.
ABSOLUTE = re.compile(r"""(?i)\b(?:https?|wss?|ftp):|(?<![:\w/])//[a-z0-9-]+(?:\.[a-z0-9-]+)+""")
#: Places where a browser would *load* a URL: markup and style attributes, CSS url()/@import, script loaders.
LOADS = re.compile(r"""(?ix)
    (?:\b(?:src|srcset|poster|data|action|formaction)\s*[:=]\s*["'`]\s*(?:https?:)?//)
  | (?:(?-i:url)\(\s*["']?\s*(?:https?:)?//)   # CSS url(), not JavaScript's URL("...") parser
  | (?:@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//)
  | (?:\b(?:importScripts|fetch|Worker|SharedWorker|EventSource|WebSocket|sendBeacon)\(\s*["'`]\s*(?:https?:|wss?:)?//)
""")


class _Refs(HTMLParser):
    """Every URL-valued attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data") and value:
                self.refs.append((tag, name, value))


@pytest.fixture(scope="module")
def auth_client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(auth_token=TOKEN)), raise_server_exceptions=False) as c:
        yield c


def _assets(client: TestClient) -> dict[str, str]:
    """Every page, the OpenAPI document, and every same-origin file a page references (scripts, styles, images):
    path -> text."""
    seen: dict[str, str] = {}
    todo = [*PAGES, "/openapi.json"]  # the document the docs pages load
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        r = client.get(path)
        assert r.status_code == 200, (path, r.status_code)
        seen[path] = r.text if "image" not in r.headers["content-type"] else ""
        if "html" in r.headers["content-type"]:
            parser = _Refs()
            parser.feed(r.text)
            for _, _, ref in parser.refs:
                if not ref.startswith(("data:", "#")):
                    todo.append(urlsplit(urljoin("http://testserver" + path, ref)).path)
    return seen


def test_playground_page(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == PAGE_CSP
    assert 'data-auth="none"' in r.text
    for testid in ("text-input", "tokenizer-select", "token-count", "decode-input", "decode-output"):
        assert f'data-testid="{testid}"' in r.text
    js = client.get("/static/playground/playground.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    for testid in ("token", "compare-row"):  # created by the script, one per token / per tokenizer
        assert f'dataset.testid = "{testid}"' in js.text


def test_docs_pages_use_the_vendored_assets(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.headers["content-security-policy"] == DOCS_CSP
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text and '"validatorUrl": null' in docs.text
    redoc = client.get("/redoc")
    assert redoc.headers["content-security-policy"] == DOCS_CSP
    assert "/static/vendor/redoc/redoc.standalone.js" in redoc.text and "fonts." not in redoc.text
    assert client.get("/openapi.json").status_code == 200


def test_no_page_references_another_host(client: TestClient) -> None:
    """Our pages, styles and scripts contain no absolute URL at all; the vendored bundles (which carry URLs in
    strings and licence comments) load none: no src/url()/@import/fetch/worker of an absolute URL. The browser
    test checks the same from the other side: no request leaves loopback."""
    assets = _assets(client)
    assert {"/", "/static/playground/playground.js", "/static/playground/playground.css",
            "/static/vendor/swagger-ui/swagger-ui-bundle.js", "/static/vendor/swagger-ui/swagger-ui.css",
            "/static/vendor/redoc/redoc.standalone.js"} <= set(assets)
    for path, text in assets.items():
        if path.startswith("/static/vendor/"):
            assert not LOADS.findall(text), (path, LOADS.findall(text)[:5])
        else:
            assert not ABSOLUTE.findall(text), (path, ABSOLUTE.findall(text)[:5])
    for pattern_check in ('<img src="https://x.example/a.png">', "url(//cdn.example/x.css)",
                          'fetch("https://api.example/v1")', '{src:"https://cdn.example/logo.svg"}'):
        assert LOADS.search(pattern_check), pattern_check  # the scanner itself finds what it must


def test_pages_and_static_files_are_open_with_auth_on(auth_client: TestClient) -> None:
    """The playground and its files hold no data: served without the token (the page then asks for it); the docs,
    the OpenAPI document and the API keep needing it."""
    page = auth_client.get("/")
    assert page.status_code == 200 and 'data-auth="required"' in page.text
    for path in ("/static/playground/playground.js", "/static/vendor/swagger-ui/swagger-ui.css"):
        assert auth_client.get(path).status_code == 200
    for path in ("/docs", "/redoc", "/openapi.json", "/tokenizers"):
        assert auth_client.get(path).status_code == 401
    assert auth_client.post("/count", json={"tokenizer": "gpt2", "text": "a"}).status_code == 401


def _raw_get(app: object, path: str) -> tuple[int, bytes]:
    """GET ``path`` straight into the ASGI app, as a raw client may send it (HTTP clients would normalize dots)."""
    messages: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        messages.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver")], "server": ("testserver", 80), "client": ("127.0.0.1", 1)}
    anyio.run(app, scope, receive, send)  # type: ignore[arg-type]
    body = b"".join(m.get("body", b"") for m in messages[1:])  # type: ignore[misc]
    return messages[0]["status"], body  # type: ignore[return-value]


@pytest.mark.parametrize("path", ["/static/../tokenizers", "/static/../routes/pages.py",
                                  "/static/playground/../../routes/pages.py", "/static/vendor/../../main.py",
                                  "/static//etc/passwd", "/static/../../../../etc/passwd"])
def test_static_prefix_opens_nothing_else(auth_client: TestClient, path: str) -> None:
    """The open /static/ prefix serves only files under app/api/static: no traversal to routes, sources or the
    file system (a 404, without the token)."""
    status, body = _raw_get(auth_client.app, path)
    assert status == 404, (path, status, body[:200])
    assert b"import" not in body and b"root:" not in body


def test_unknown_static_file_is_the_json_404(client: TestClient) -> None:
    r = client.get("/static/playground/nope.js")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found"


def test_vendored_files_match_their_checksums() -> None:
    lines = (VENDOR / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    sums = dict(reversed(line.split(None, 1)) for line in lines if line.strip())
    on_disk = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*") if p.is_file()}
    assert on_disk - set(sums) == {"README.md", "SHA256SUMS"}
    for rel, digest in sums.items():
        assert hashlib.sha256((VENDOR / rel).read_bytes()).hexdigest() == digest, rel
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    for rel in sums:
        assert Path(rel).name in readme or rel.endswith(("LICENSE", "NOTICE", ".LICENSE.txt")), rel


def test_vendored_licences() -> None:
    assert "Apache License" in (VENDOR / "swagger-ui" / "LICENSE").read_text(encoding="utf-8")
    assert "SmartBear" in (VENDOR / "swagger-ui" / "NOTICE").read_text(encoding="utf-8")
    assert "The MIT License" in (VENDOR / "redoc" / "LICENSE").read_text(encoding="utf-8")
    for bundle in ("swagger-ui/swagger-ui-bundle.js", "redoc/redoc.standalone.js"):
        first = (VENDOR / bundle).read_text(encoding="utf-8")[:200]
        assert "For license information please see" in first and (VENDOR / f"{bundle}.LICENSE.txt").is_file()


def test_package_data_ships_every_static_file() -> None:
    """A wheel must hold every file the pages serve (pyproject's package-data globs for app.api)."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["app.api"]
    package = STATIC_DIR.parent
    files = [str(p.relative_to(package)) for p in STATIC_DIR.rglob("*") if p.is_file()]
    assert len(files) >= 14
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert not unshipped
