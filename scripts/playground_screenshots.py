"""Regenerate the screenshots of the playground and the docs under docs/ (shown in docs/playground.md).

    python scripts/playground_screenshots.py [--out docs]

Starts ``python -m app serve`` on loopback and drives the system Chromium (as the browser tests do), with every
request that leaves loopback blocked. For readable CJK and emoji glyphs install fonts first (Debian:
``apt-get install fonts-noto-cjk fonts-noto-color-emoji``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from harness.server import start  # noqa: E402
from tests.api.browser import launch, watched_page  # noqa: E402

TEXT = ("Tokenizers split text into pieces: common words are one token, rare ones several.\n"
        "東京は日本の首都です。 naïve café 🙂")


def _ready(page: object, url: str) -> None:
    page.goto(url)  # type: ignore[attr-defined]
    page.wait_for_selector('body[data-ready="true"]')  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs")
    out: Path = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = start(Path(tmp) / "server.log")
        try:
            with launch() as browser:
                with watched_page(browser, viewport={"width": 1100, "height": 860}) as w:
                    page = w.page
                    _ready(page, f"{server.url}/")
                    page.select_option('[data-testid="tokenizer-select"]', "model:gpt-4o")
                    page.fill('[data-testid="text-input"]', TEXT)
                    page.wait_for_selector('[data-testid="token"]')
                    first = page.locator('[data-testid="token"]').evaluate_all(
                        "ts => ts.slice(0, 6).map(t => t.dataset.id).join(', ')")  # decode the first few back
                    page.fill('[data-testid="decode-input"]', first)
                    page.wait_for_function("() => document.querySelector('[data-testid=\"decode-output\"]')"
                                           ".textContent.length > 0")
                    page.hover('[data-testid="token"] >> nth=-4')
                    page.screenshot(path=str(out / "playground.png"), full_page=True)
                    page.click('[data-sample="ja"]')
                    page.click("#tab-compare")
                    page.wait_for_selector('[data-testid="compare-row"]')
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(out / "playground-compare.png"), full_page=True)
                    page.goto(f"{server.url}/docs")
                    page.wait_for_selector('.opblock-summary-path:has-text("/encode")')
                    page.click('.opblock-summary-path:has-text("/encode")')
                    page.wait_for_timeout(800)
                    page.screenshot(path=str(out / "api-docs.png"))
                    w.assert_clean()
                with watched_page(browser, viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, device_scale_factor=1) as w:
                    page = w.page
                    _ready(page, f"{server.url}/")
                    page.fill('[data-testid="text-input"]', TEXT)
                    page.wait_for_selector('[data-testid="token"]')
                    page.screenshot(path=str(out / "playground-mobile.png"), full_page=True)
                    w.assert_clean()
        finally:
            server.stop()
    for name in ("playground.png", "playground-compare.png", "playground-mobile.png", "api-docs.png"):
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
