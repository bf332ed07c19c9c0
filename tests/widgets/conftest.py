"""Browser fixtures: Debian's Chromium driven by Playwright (never a downloaded browser).

Each test's page is screenshotted into build/test-results/browser/ (kept with the test
results); a JavaScript error on the page fails the test. A page's own waits (an element to show, a click to
land) get ``paint_ms()``: generous, and longer the busier the machine (deadlines.py).
"""
from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from deadlines import paint_ms

CHROMIUM = os.environ.get("TLXWB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# closed network: no background fetches, no GPU, root needs --no-sandbox
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
SHOTS = pathlib.Path(__file__).resolve().parents[2] / "build" / "test-results" / "browser"


def _browser_skip_reason() -> str | None:
    if not os.path.exists(CHROMIUM):
        return (f"no Chromium at {CHROMIUM}: install Debian's (apt-get install -y chromium chromium-driver); "
                "`make test` does it")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install playwright; no browser download needed)"
    return None


@pytest.fixture(scope="session")
def browser():
    reason = _browser_skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    pg = browser.new_page(viewport={"width": 1200, "height": 800})
    pg.set_default_timeout(paint_ms())
    pg.set_default_navigation_timeout(paint_ms())
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield pg
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        pg.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
    finally:
        pg.close()
    assert not errors, f"errors on the page: {errors}"


@pytest.fixture
def show(page, tmp_path):
    """show(*views) -> page with the views live (standalone page, same ESM as in Jupyter)."""
    from tlx_workbench.widgets import standalone_html

    def _show(*views, name="views.html"):
        path = tmp_path / name
        path.write_text(standalone_html(list(views)))
        page.goto(path.as_uri())
        # the harness marks the body once every view's render returned (a render that threw never does)
        timeout = paint_ms()
        try:
            page.wait_for_selector("body[data-ready='1']", state="attached", timeout=timeout)
        except Exception:
            raise AssertionError(f"waited {timeout / 1000:.0f} s for the views of {path.name} to be drawn; the page "
                                 f"shows: {page.inner_text('body')[:600]!r}") from None
        return page
    return _show


@pytest.fixture
def show_static(page, tmp_path):
    """show_static(html) -> page showing a static fallback (no script runs)."""
    def _show(html_text, name="static.html"):
        path = tmp_path / name
        path.write_text(f"<!doctype html><meta charset='utf-8'><body style='margin:8px'>{html_text}</body>")
        page.goto(path.as_uri())
        return page
    return _show
