"""The playground and the docs in a real browser (headless Chromium, Playwright) against a real server on loopback:
typing shows the service's count (one request per pause), token details on hover and keyboard focus, partial
UTF-8 and whitespace made visible, switching tokenizer and model, the compare view, decoding, the bearer-token
prompt, a phone-sized screen, and /docs and /redoc rendering with every non-loopback request blocked. Every page
must finish with no console error and no request to another host.

Skipped, saying so, only when the system Chromium is missing (Debian: ``apt-get install chromium``), unless
``TOKENIZER_TEST_BROWSER=required`` makes that a failure (CI sets it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from app.engine import get_tokenizer

from .browser import CHROMIUM, Watched, chromium_available, launch, watched_page
from .conftest import LiveServer, start_server

#: ``TOKENIZER_TEST_BROWSER=required`` (CI) turns a missing Chromium into a failure instead of a skip.
REQUIRED = os.environ.get("TOKENIZER_TEST_BROWSER") == "required"

pytestmark = [
    pytest.mark.skipif(not chromium_available() and not REQUIRED, reason=f"no Chromium at {CHROMIUM} (Debian: "
                       "apt-get install chromium; or set TOKENIZER_TEST_CHROMIUM): browser tests skipped"),
    pytest.mark.timeout(300),
]

TOKEN = "browser-test-token-5c1e"
TEXT = "Hello, wörld! Tokenizers split 日本語 too 🙂\nsecond line"
TOKENS = '[data-testid="token"]'
CLOCK_START = 1_800_000_000  # seconds since the epoch, for the page's fake clock


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not chromium_available():
        pytest.fail(f"TOKENIZER_TEST_BROWSER=required but there is no Chromium at {CHROMIUM}")
    with launch() as b:
        yield b


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    s = start_server(tmp_path_factory.mktemp("server"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    s = start_server(tmp_path_factory.mktemp("auth-server"), env={"TOKENIZER_AUTH_TOKEN": TOKEN})
    yield s
    s.stop()


@pytest.fixture
def view(browser: Any) -> Iterator[Watched]:
    """A desktop-sized page; after the test: no console error, no request to another host."""
    with watched_page(browser, viewport={"width": 1200, "height": 900}) as w:
        yield w
        w.assert_clean()


def _api(server: LiveServer, path: str, body: dict[str, Any] | None = None, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with server.client() as c:
        r = c.post(path, json=body, headers=headers) if body is not None else c.get(path, headers=headers)
        r.raise_for_status()
        return r.json()


def _open(w: Watched, server: LiveServer) -> Any:
    page = w.page
    page.goto(f"{server.url}/")
    page.wait_for_selector('body[data-ready="true"]')
    return page


def _wait_count(page: Any, count: int) -> None:
    page.wait_for_function("n => document.querySelector('[data-testid=\"token-count\"]').textContent === "
                           "new Intl.NumberFormat('en-US').format(n) && "
                           "document.querySelectorAll('[data-testid=\"token\"]').length === n", arg=count)


def _ids(page: Any) -> list[int]:
    return [int(x) for x in page.locator(TOKENS).evaluate_all("els => els.map(e => e.dataset.id)")]


def _tooltip(page: Any) -> dict[str, str]:
    page.wait_for_selector('[data-testid="token-tooltip"]:not([hidden])')
    return dict(page.locator('[data-testid="token-tooltip"] dd').evaluate_all(
        "dds => dds.map(d => [d.dataset.field, d.textContent])"))


def test_typing_shows_the_services_count_with_one_request_per_pause(view: Watched, server: LiveServer) -> None:
    view.page.clock.install(time=CLOCK_START)
    page = _open(view, server)
    page.clock.pause_at(CLOCK_START + 3600)  # from here the debounce timer fires only when the test lets time pass
    encodes: list[str] = []
    page.on("request", lambda r: encodes.append(r.post_data or "") if r.url.endswith("/encode") else None)
    page.locator('[data-testid="text-input"]').press_sequentially(TEXT, delay=5)
    page.wait_for_timeout(100)
    assert encodes == [], "a request went out while typing"
    page.clock.run_for(1000)
    expected = _api(server, "/count", {"tokenizer": "cl100k_base", "text": TEXT})["count"]
    _wait_count(page, expected)
    assert len(encodes) == 1 and json.loads(encodes[0])["text"] == TEXT
    assert _ids(page) == _api(server, "/encode", {"tokenizer": "cl100k_base", "text": TEXT})["ids"]
    chars, nbytes = len(TEXT), len(TEXT.encode())
    assert page.text_content('[data-testid="char-count"]') == str(chars)
    assert page.text_content('[data-testid="bytes-per-token"]') == f"{nbytes / expected:.2f}"
    page.locator('[data-testid="text-input"]').press_sequentially(" more", delay=5)  # a second pause: one more
    page.clock.run_for(1000)
    _wait_count(page, _api(server, "/count", {"tokenizer": "cl100k_base", "text": TEXT + " more"})["count"])
    assert len(encodes) == 2


def test_token_details_on_hover_and_keyboard_focus(view: Watched, server: LiveServer) -> None:
    page = _open(view, server)
    tokenizer = get_tokenizer("cl100k_base")
    text = "naïve tokens"
    ids = tokenizer.encode(text)
    page.fill('[data-testid="text-input"]', text)
    _wait_count(page, len(ids))
    page.hover(f"{TOKENS} >> nth=1")
    tip = _tooltip(page)
    piece = tokenizer.token_bytes(ids[1])
    assert tip["id"] == str(ids[1])
    assert tip["bytes"] == " ".join(f"{b:02X}" for b in piece) + f" ({len(piece)})"
    assert tip["token"] == json.dumps(piece.decode(), ensure_ascii=False)
    page.mouse.move(0, 0)
    page.wait_for_selector('[data-testid="token-tooltip"]', state="hidden")
    page.locator(f"{TOKENS} >> nth=0").focus()  # the first token is the token list's tab stop
    assert _tooltip(page)["id"] == str(ids[0])
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.dataset.id") == str(ids[1])
    assert _tooltip(page)["id"] == str(ids[1])
    page.keyboard.press("End")
    assert _tooltip(page)["id"] == str(ids[-1])
    assert page.locator(f"{TOKENS}[tabindex='0']").count() == 1  # one tab stop: arrows move inside the list


def test_partial_utf8_and_whitespace_are_visible(view: Watched, server: LiveServer) -> None:
    page = _open(view, server)
    tokenizer = get_tokenizer("cl100k_base")
    text = "語🙂 a  b\n\tc"
    ids = tokenizer.encode(text)
    pieces = [tokenizer.token_bytes(i) for i in ids]
    partial = [p for p in pieces if _not_utf8(p)]
    assert partial  # the text must exercise the case
    page.fill('[data-testid="text-input"]', text)
    _wait_count(page, len(ids))
    shown = page.locator(f"{TOKENS}.partial").all_text_contents()
    assert shown == [" ".join(f"{b:02X}" for b in p) for p in partial]
    page.hover(f"{TOKENS}.partial >> nth=0")
    assert "not valid UTF-8" in _tooltip(page)["token"]
    drawn = page.text_content('[data-testid="token-view"]') or ""
    for glyph in ("·", "⏎", "→"):
        assert glyph in drawn, glyph
    assert "語" in drawn and "🙂" in drawn  # the characters themselves are shown once beside their byte tokens


def _not_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_switching_tokenizer_and_model(view: Watched, server: LiveServer) -> None:
    page = _open(view, server)
    listed = _api(server, "/tokenizers")["tokenizers"]
    values = page.locator('[data-testid="tokenizer-select"] option').evaluate_all("os => os.map(o => o.value)")
    assert values == [f"tokenizer:{t['name']}" for t in listed] + sorted(
        f"model:{m}" for t in listed for m in t["models"])
    page.fill('[data-testid="text-input"]', TEXT)
    for t in listed:
        page.select_option('[data-testid="tokenizer-select"]', f"tokenizer:{t['name']}")
        _wait_count(page, _api(server, "/count", {"tokenizer": t["name"], "text": TEXT})["count"])
        assert page.locator('[data-testid="context-use"]').is_hidden()
    page.select_option('[data-testid="tokenizer-select"]', "model:gpt-4o")
    usage = _api(server, "/count", {"model": "gpt-4o", "text": TEXT})
    _wait_count(page, usage["count"])
    model = usage["model"]
    context = page.text_content('[data-testid="context-use"]') or ""
    assert context.startswith(f"{usage['count']} / {model['context_window']:,}")
    cost = page.text_content('[data-testid="estimated-cost"]') or ""
    # the page shows the exact decimal string the service sent, and the breakdown of the selected model
    assert cost == "$" + model["estimated_input_cost"]
    breakdown = page.text_content('[data-testid="price-breakdown"]') or ""
    assert f"input ${model['price']['breakdown']['input']}" in breakdown
    assert f"total ${model['price']['total']}" in breakdown


def test_compare_view(view: Watched, server: LiveServer) -> None:
    page = _open(view, server)
    text = "東京は日本の首都です。トークナイザーはテキストを分割します。"
    page.fill('[data-testid="text-input"]', text)
    page.locator("#tab-tokens").focus()
    page.keyboard.press("ArrowRight")  # tabs follow the arrow keys
    listed = [t["name"] for t in _api(server, "/tokenizers")["tokenizers"]]
    page.wait_for_function("n => document.querySelectorAll('[data-testid=\"compare-row\"]').length === n",
                           arg=len(listed))
    rows = page.locator('[data-testid="compare-row"]')
    counts = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        counts[row.get_attribute("data-tokenizer")] = int(row.locator('[data-testid="compare-count"]').inner_text())
    assert counts == {name: _api(server, "/count", {"tokenizer": name, "text": text})["count"] for name in listed}
    best = page.locator('[data-testid="compare-row"].best').evaluate_all("rs => rs.map(r => r.dataset.tokenizer)")
    assert set(best) == {name for name, n in counts.items() if n == min(counts.values())}


def test_decode_box(view: Watched, server: LiveServer) -> None:
    page = _open(view, server)
    text = "héllo wörld 🙂"
    ids = get_tokenizer("cl100k_base").encode(text)
    page.fill('[data-testid="decode-input"]', ", ".join(map(str, ids)))
    page.wait_for_function("t => document.querySelector('[data-testid=\"decode-output\"]').textContent === t",
                           arg=text)
    page.fill('[data-testid="decode-input"]', f"[{ids[0]}, 100256]")  # unassigned in cl100k_base: the 422's message
    page.wait_for_function("() => document.querySelector('[data-testid=\"decode-output\"]').textContent"
                           ".includes('100256')")
    assert "not in the vocabulary" in (page.text_content('[data-testid="decode-output"]') or "")
    view.expect_http_errors(422)
    page.fill('[data-testid="decode-input"]', "12, x")  # caught in the page, no request
    page.wait_for_function("() => document.querySelector('[data-testid=\"decode-output\"]').textContent"
                           ".includes('integers')")


def test_auth_prompt_keeps_the_token_in_the_session_only(browser: Any, auth_server: LiveServer) -> None:
    with watched_page(browser, viewport={"width": 1000, "height": 800}) as w:
        page = w.page
        api_calls: list[str] = []
        page.on("request", lambda r: api_calls.append(r.url) if "/static/" not in r.url and not
                r.url.endswith("/") else None)
        page.goto(f"{auth_server.url}/")
        page.wait_for_selector("#auth[open]")
        assert api_calls == []  # the page asks first instead of collecting a 401
        page.fill('[data-testid="auth-token"]', "wrong-token")
        page.click('[data-testid="auth-submit"]')
        page.wait_for_function("() => document.querySelector('#auth-message').textContent.includes('refused')")
        assert page.locator("#auth[open]").count() == 1
        page.fill('[data-testid="auth-token"]', TOKEN)
        page.click('[data-testid="auth-submit"]')
        page.wait_for_selector('body[data-ready="true"]')
        page.fill('[data-testid="text-input"]', TEXT)
        _wait_count(page, _api(auth_server, "/count", {"tokenizer": "cl100k_base", "text": TEXT}, TOKEN)["count"])
        assert page.evaluate("sessionStorage.getItem('tokenizer-service.token')") == TOKEN
        assert page.evaluate("localStorage.length") == 0 and page.evaluate("document.cookie") == ""
        page.reload()  # same tab: the session keeps the token
        page.wait_for_selector('body[data-ready="true"]')
        assert page.locator("#auth[open]").count() == 0
        w.expect_http_errors(401)  # the wrong token's refusal
        w.assert_clean()
    with watched_page(browser) as w:  # a new session starts without it
        w.page.goto(f"{auth_server.url}/")
        w.page.wait_for_selector("#auth[open]")
        w.assert_clean()


def test_readable_on_a_phone(browser: Any, server: LiveServer) -> None:
    with watched_page(browser, viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True,
                      device_scale_factor=2) as w:
        page = _open(w, server)
        page.fill('[data-testid="text-input"]', TEXT * 3)
        _wait_count(page, _api(server, "/count", {"tokenizer": "cl100k_base", "text": TEXT * 3})["count"])
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        size = page.evaluate("parseFloat(getComputedStyle(document.querySelector('textarea')).fontSize)")
        assert size >= 16  # phones do not zoom into the field
        w.assert_clean()


def _axe_violations(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    violations = Axe().run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}" for v in violations]


def test_accessibility_audit(browser: Any, server: LiveServer, auth_server: LiveServer) -> None:
    """axe-core (every rule it runs by default: labels, roles, contrast, keyboard focus, ...) finds nothing on the
    tokens view (with partial-byte tokens, a token's details and a decode error), the compare view, and the
    token prompt."""
    with watched_page(browser, viewport={"width": 1200, "height": 900}) as w:
        page = _open(w, server)
        page.fill('[data-testid="text-input"]', TEXT)
        _wait_count(page, _api(server, "/count", {"tokenizer": "cl100k_base", "text": TEXT})["count"])
        page.fill('[data-testid="decode-input"]', "9906, 100256")
        page.wait_for_function("() => document.querySelector('[data-testid=\"decode-output\"]').textContent"
                               ".includes('100256')")
        page.locator(f"{TOKENS} >> nth=2").focus()
        assert _axe_violations(page) == []
        page.click("#tab-compare")
        page.wait_for_selector('[data-testid="compare-row"]')
        assert _axe_violations(page) == []
        w.expect_http_errors(422)
        w.assert_clean()
    with watched_page(browser) as w:
        w.page.goto(f"{auth_server.url}/")
        w.page.wait_for_selector("#auth[open]")
        assert _axe_violations(w.page) == []
        w.assert_clean()


@pytest.mark.parametrize("path,ready", [
    ("/docs", '.opblock-summary-path:has-text("/encode")'),
    ("/redoc", 'h2:has-text("Token ids of a text")'),
])
def test_docs_render_with_the_network_blocked(view: Watched, server: LiveServer, path: str, ready: str) -> None:
    page = view.page
    page.goto(f"{server.url}{path}")
    page.wait_for_selector(ready, timeout=60000)
    assert page.locator("body").inner_text().count("/count") >= 1 or path == "/redoc"


def test_swagger_ui_shows_the_oneof_and_tries_a_request(view: Watched, server: LiveServer) -> None:
    """The docs are usable offline: an operation opens, shows its examples, and "Try it out" reaches the service."""
    page = view.page
    page.goto(f"{server.url}/docs")
    page.click('.opblock-summary-path:has-text("/count")')
    page.wait_for_selector('.opblock-body textarea, .opblock-body .body-param__text', timeout=60000)
    page.click('.opblock-body button.execute')
    page.wait_for_selector('.live-responses-table .response-col_status:has-text("200")', timeout=60000)

