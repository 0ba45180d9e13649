"""In a real browser (Playwright on Debian's Chromium) against a real `kb serve`: find a
crash by a path and a mangled symbol its log printed, see the line that matched, follow
a tag to the tag filter, switch list views. Screenshots go to /tmp/shots-search/ (and
tests/artifacts/) for a person to look at."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import kb_serve_process
from tests.service.logs import HEADS, NCCL, WRAPPER_ONLY, vllm_log, with_lines
from tests.web.test_browser import ARTIFACTS, _need_chromium, browser, page  # noqa: F401

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("KB_TEST_SHOTS", "/tmp/shots-search"))
SYMBOL = "_ZN3c104cuda20CUDACachingAllocator9allocatorE"
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _need_chromium()
    tmp = tmp_path_factory.mktemp("e2e-search")
    env = {**os.environ, "KB_DATABASE_URL": f"sqlite:///{tmp}/kb.db", "KB_SEED": "0",
           "KB_LOG_LEVEL": "warning"}
    env.pop("KB_API_TOKENS", None)
    with kb_serve_process(env, tmp / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def incidents(server: str) -> dict[str, int]:
    """Three uploads through the API: a native crash printing the path and the symbol,
    another crash (tagged), and a wrapper-only log."""
    def post(log: str) -> int:
        response = httpx.post(f"{server}/incidents", files={"log": ("vllm.log", log.encode())},
                              headers={"Accept": "application/json"}, timeout=30)
        assert response.status_code in (200, 201), response.text
        return int(response.json()["incident"]["id"])

    native = post(with_lines(
        vllm_log(**NCCL), f"frame #3: {SYMBOL} + 0x1c (0x7f3a in {LIBCUDA})"))
    heads = post(vllm_log(**HEADS))
    wrapper = post(WRAPPER_ONLY)
    patched = httpx.patch(f"{server}/incidents/{heads}", json={"tags": ["tp-size", "attention"]},
                          timeout=30)
    assert patched.status_code == 200, patched.text
    return {"native": native, "heads": heads, "wrapper": wrapper}


def _shot(page: object, name: str) -> None:
    for folder in (SHOTS, ARTIFACTS):
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / name), full_page=True)  # type: ignore[attr-defined]


def test_search_by_a_path_and_a_symbol_in_the_log(page, server, incidents):
    from playwright.sync_api import expect

    page.goto(f"{server}/ui/incidents")
    expect(page.locator("li.incident")).to_have_count(3)
    for query in (LIBCUDA, SYMBOL, "libcuda.so.1"):
        page.get_by_label("Search", exact=True).fill(query)
        page.keyboard.press("Enter")
        rows = page.locator("li.incident")
        expect(rows).to_have_count(1)
        expect(rows.first.locator("a.title")).to_contain_text(f"#{incidents['native']}")
        match = rows.first.locator(".log-match")
        expect(match.locator("code")).to_contain_text(query)
        expect(match.locator("code")).to_contain_text("frame #3")
    _shot(page, "search-log-text.png")
    # the matching line links to the stored log, which holds it
    href = page.locator(".log-match a").first.get_attribute("href")
    response = page.request.get(href)
    assert response.ok and SYMBOL in response.text()
    # nothing matches a wildcard-only query, and the page says so
    page.get_by_label("Search", exact=True).fill("%%%")
    page.keyboard.press("Enter")
    expect(page.locator("li.incident")).to_have_count(0)
    expect(page.locator("p.empty")).to_contain_text("match these filters")


def test_tags_link_to_the_tag_filter_and_views_split_the_list(page, server, incidents):
    from playwright.sync_api import expect

    page.goto(f"{server}/ui/incidents")
    page.locator("li.incident").filter(has_text=f"#{incidents['heads']}").get_by_role(
        "link", name="tp-size").click()
    expect(page).to_have_url(f"{server}/ui/incidents?tag=tp-size")
    expect(page.locator("li.incident")).to_have_count(1)
    expect(page.get_by_label("Tag")).to_have_value("tp-size")
    _shot(page, "tag-filter.png")
    # the tag filter typed by hand, and the tags of the detail page link the same way
    page.get_by_label("Tag").fill("attention")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("li.incident")).to_have_count(1)
    page.goto(f"{server}/ui/incidents/{incidents['heads']}")
    page.get_by_role("link", name="attention", exact=True).click()
    expect(page).to_have_url(f"{server}/ui/incidents?tag=attention")

    # views: the wrapper-only upload needs triage; nothing is seeded here
    page.goto(f"{server}/ui/incidents")
    page.get_by_role("link", name="Needs triage").click()
    expect(page.locator("li.incident")).to_have_count(1)
    expect(page.locator("li.incident a.title")).to_contain_text("Cause not captured")
    page.get_by_role("link", name="Seen here", exact=True).click()
    expect(page.locator("li.incident")).to_have_count(3)
    page.get_by_role("link", name="Seeded, not seen here").click()
    expect(page.locator("li.incident")).to_have_count(0)
    # the wrapper-only incident's page says the cause was not captured, not "no upload"
    page.goto(f"{server}/ui/incidents/{incidents['wrapper']}")
    expect(page.locator("p.not-captured")).to_be_visible()
    expect(page.get_by_text("No upload stored yet")).to_have_count(0)
    expect(page.locator("section.breakdown")).to_contain_text("0.11.0")
    _shot(page, "triage-detail.png")


def test_a_long_matching_line_fits_a_phone_screen(browser, server, incidents):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(f"{server}/ui/incidents?q={SYMBOL}")
        expect(page.locator(".log-match code")).to_contain_text(SYMBOL)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        _shot(page, "search-phone.png")
    finally:
        context.close()
