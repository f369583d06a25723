"""Headless Chromium for the page tests and the screenshot script: Debian's ``chromium`` driven by Playwright (the
system browser, no browser download), every request that leaves loopback blocked and recorded, console errors
collected."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: The system browser (Debian: ``apt-get install chromium``); ``TOKENIZER_TEST_CHROMIUM`` overrides the path.
CHROMIUM = os.environ.get("TOKENIZER_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def chromium_available() -> bool:
    return os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)


@dataclass
class Watched:
    """A page with what it did: console errors, uncaught exceptions, and requests blocked for leaving loopback."""

    page: Any
    errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def expect_http_errors(self, status: int) -> None:
        """Drop the console's "status of N" resource errors: the test provoked them (e.g. a 401 before the token)."""
        self.errors[:] = [e for e in self.errors if f"status of {status}" not in e]

    def assert_clean(self) -> None:
        assert not self.blocked, f"requests to other hosts: {self.blocked}"
        assert not self.errors, f"console errors: {self.errors}"


@contextmanager
def launch() -> Iterator[Any]:
    """A Playwright Chromium browser (the system's executable)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def watched_page(browser: Any, **context_args: Any) -> Iterator[Watched]:
    """A fresh context and page; requests to any host but loopback are aborted and recorded."""
    context = browser.new_context(**context_args)
    page = context.new_page()
    watched = Watched(page)

    def route(r: Any) -> None:
        if urlsplit(r.request.url).hostname in LOOPBACK:
            r.continue_()
        else:
            watched.blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page.on("console", lambda m: watched.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watched.errors.append(f"uncaught: {e}"))
    try:
        yield watched
    finally:
        context.close()
