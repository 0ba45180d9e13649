"""End to end in a real browser: Playwright drives Debian's Chromium against a real
`kb serve` process on an empty SQLite knowledge base. Upload logs, find one by search,
open it, add a fix, report an outcome, merge two incidents. Screenshots of the list and
detail pages (laptop and phone widths) land in tests/artifacts/ for a human to look at.

Needs /usr/bin/chromium (`apt-get install chromium`); Playwright's own browser download
is never used. Without Chromium: FAIL under CI=true, skip otherwise."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import kb_serve_process
from tests.service.logs import HEADS, NCCL, vllm_log

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("KB_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _need_chromium() -> None:
    reason = None
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        reason = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is not installed (pip install -e '.[test]')"
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _need_chromium()
    tmp = tmp_path_factory.mktemp("e2e")
    env = {**os.environ, "KB_DATABASE_URL": f"sqlite:///{tmp}/kb.db", "KB_SEED": "0",
           "KB_LOG_LEVEL": "warning"}
    env.pop("KB_API_TOKENS", None)
    with kb_serve_process(env, tmp / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def browser(server: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_default_timeout(15_000)
    yield page
    context.close()
    assert not dialogs, f"a script ran in the page: {dialogs}"


def _shot(page: object, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)  # type: ignore[attr-defined]


def _upload_pasted(page, server: str, log: str) -> int:
    page.goto(f"{server}/ui/upload")
    page.get_by_label("…or paste the log").fill(log)
    page.get_by_role("button", name="Analyze").click()
    link = page.locator("#incident-link")
    link.wait_for()
    return int(link.get_attribute("href").rsplit("/", 1)[-1])


def test_upload_search_open_fix_outcome_merge(page, server, tmp_path):
    from playwright.sync_api import expect

    # upload: one pasted, one chosen as a file, one with markup in its message
    heads = _upload_pasted(page, server, vllm_log(**HEADS, model="Qwen/Qwen3-32B"))
    expect(page.get_by_role("heading", name="New crash")).to_be_visible()
    _shot(page, "upload-result.png")
    log_file = tmp_path / "vllm.log"
    log_file.write_text(vllm_log())
    page.goto(f"{server}/ui/upload")
    page.get_by_label("Log file").set_input_files(str(log_file))
    page.get_by_role("button", name="Analyze").click()
    kv = int(page.locator("#incident-link").get_attribute("href").rsplit("/", 1)[-1])
    nccl = _upload_pasted(page, server, vllm_log(**NCCL))
    _upload_pasted(page, server, vllm_log(**NCCL, seed=7))  # a second occurrence
    script = _upload_pasted(page, server, vllm_log(exception="RuntimeError",
                                                   message="bad <script>alert(1)</script> prompt"))
    expect(page.locator("mark.exc").first).to_contain_text("<script>alert(1)</script>")
    assert len({heads, kv, nccl, script}) == 4

    # the list, then find one by search
    page.goto(f"{server}/ui/incidents")
    expect(page.locator("li.incident")).to_have_count(4)
    _shot(page, "list.png")
    page.get_by_label("Search", exact=True).fill("attention heads")
    page.keyboard.press("Enter")
    expect(page.locator("li.incident")).to_have_count(1)
    page.get_by_role("link", name=f"#{heads}").click()
    expect(page).to_have_url(f"{server}/ui/incidents/{heads}")
    expect(page.locator("mark.exc").first).to_contain_text("attention heads")
    expect(page.locator("details.wrappers")).not_to_have_attribute("open", "")

    # add a fix
    add = page.locator("details.add-fix")
    add.get_by_text("Add a fix").click()
    add.get_by_label("Title", exact=True).fill("Use a TP size that divides the heads")
    add.get_by_label("Kind").select_option("config")
    add.get_by_label("Description").fill("40 heads: use --tensor-parallel-size 4 or 8")
    add.get_by_label("Change").fill("flags=--tensor-parallel-size 4")
    add.get_by_role("button", name="Add fix").click()
    expect(page.locator("p.flash")).to_have_text("Fix added.")
    fix = page.locator("li.fix").first
    expect(fix).to_contain_text("Use a TP size that divides the heads")
    expect(fix).to_contain_text("worked 0")

    # report an outcome
    fix.get_by_label("Note (optional)").fill("TP=4 on 4×H100 starts fine")
    fix.get_by_role("button", name="✓ It worked").click()
    expect(page.locator("p.flash")).to_contain_text("worked")
    expect(page.locator("li.fix").first).to_contain_text("worked 1")
    expect(page.locator("section.rec")).to_contain_text("patch")
    _shot(page, "detail.png")

    # keyboard: the search box and the first result are reachable with Tab
    page.goto(f"{server}/ui/incidents")
    page.keyboard.press("Tab")
    expect(page.locator(".skip")).to_be_focused()

    # merge two incidents: the NCCL one into the KV cache one
    page.goto(f"{server}/ui/incidents/{nccl}")
    page.get_by_label("Merge this incident (a duplicate) into #").fill(str(kv))
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page).to_have_url(f"{server}/ui/incidents/{kv}?done=merged&merged={nccl}&into={kv}")
    expect(page.locator("p.flash")).to_have_text(f"Merged #{nccl} into #{kv}.")
    expect(page.locator("#occ-h")).to_contain_text("3")
    page.goto(f"{server}/ui/incidents/{nccl}")
    expect(page.locator(".flash.warn")).to_contain_text("was merged into")
    page.goto(f"{server}/ui/incidents")
    expect(page.locator("li.incident")).to_have_count(3)

    # unmerge it again from the merged incident's page: both are listed once more
    page.goto(f"{server}/ui/incidents/{nccl}")
    page.get_by_role("button", name=f"Unmerge #{nccl}").click()
    expect(page.locator("p.flash")).to_contain_text(f"Unmerged #{nccl}")
    _shot(page, "unmerged.png")
    page.goto(f"{server}/ui/incidents")
    expect(page.locator("li.incident")).to_have_count(4)

    # the redacted log of an occurrence opens as text
    page.goto(f"{server}/ui/incidents/{script}")
    href = page.get_by_role("link", name="log #").first.get_attribute("href")
    response = page.request.get(href)
    assert response.ok and response.headers["content-type"].startswith("text/plain")
    assert "<script>alert(1)</script>" in response.text()


def test_phone_width_screenshots(browser, server):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(f"{server}/ui/incidents")
        expect(page.locator("li.incident").first).to_be_visible()
        # nothing wider than the screen
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        _shot(page, "list-phone.png")
        page.locator("li.incident a.title").first.click()
        expect(page.locator("h1")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        _shot(page, "detail-phone.png")
    finally:
        context.close()


def _loopback_only(context: object) -> list[str]:
    """Cut the page off from every address but loopback (an air-gapped cluster); return
    the list of requests that tried to leave."""
    from urllib.parse import urlsplit

    escaped: list[str] = []

    def route(r: object) -> None:
        url = r.request.url  # type: ignore[attr-defined]
        if urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1"):
            r.continue_()  # type: ignore[attr-defined]
        else:
            escaped.append(url)
            r.abort()  # type: ignore[attr-defined]

    context.route("**/*", route)  # type: ignore[attr-defined]
    return escaped


def test_api_docs_render_their_routes_with_no_network(browser, server):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    escaped = _loopback_only(context)
    page = context.new_page()
    try:
        page.goto(f"{server}/ui/incidents")
        page.get_by_role("link", name="API").click()
        expect(page.locator(".opblock-summary-path").first).to_be_visible(timeout=15_000)
        paths = set(page.locator(".opblock-summary-path").all_inner_texts())
        assert {"/incidents", "/analyze", "/incidents/{incident_id}", "/healthz"} <= {
            p.replace("\u200b", "").strip() for p in paths}, paths
        _shot(page, "api-docs-offline.png")
    finally:
        context.close()
    assert escaped == []


def test_the_url_an_upload_prints_opens_the_incident_page(page, server):
    import httpx
    from playwright.sync_api import expect

    answer = httpx.post(f"{server}/incidents", headers={"Accept": "application/json"},
                        files={"log": ("vllm.log", vllm_log(**HEADS, seed=11).encode())},
                        timeout=30).json()
    printed = httpx.post(f"{server}/incidents", headers={"User-Agent": "curl/8.5.0"},
                         files={"log": ("vllm.log", vllm_log(**HEADS, seed=12).encode())},
                         timeout=30).text
    url = answer["incident"]["url"]
    assert f"  {url}\n" in printed  # curl prints the same URL the JSON gives
    page.goto(url)
    expect(page).to_have_url(f"{server}/ui/incidents/{answer['incident']['id']}")
    expect(page.locator("h1")).to_contain_text(answer["incident"]["title"][:40])
    page.get_by_role("link", name="JSON").click()
    assert httpx.get(url, headers={"Accept": "application/json"}, timeout=10).json()["id"] == \
        answer["incident"]["id"]
    expect(page.locator("body")).to_contain_text(f'"id":{answer["incident"]["id"]}')
