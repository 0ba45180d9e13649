"""In a real browser against a real `kb serve` with a webhook receiver on 127.0.0.1:
resolve an incident from its page, upload the crash again from a newer version, see the
regression on the page and in the list, find its delivery on the Notifications page,
and reopen it. (Chromium as in test_browser.py.)"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import kb_serve_process
from tests.service.logs import vllm_log
from tests.service.receiver import Receiver, wait_until
from tests.web.test_browser import _need_chromium, _shot, _upload_pasted, browser, page  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[str]:
    _need_chromium()
    tmp = tmp_path_factory.mktemp("e2e-regressions")
    env = {**os.environ, "KB_DATABASE_URL": f"sqlite:///{tmp}/kb.db", "KB_SEED": "0",
           "KB_LOG_LEVEL": "warning", "KB_WEBHOOKS": f"slack={receiver.url()}"}
    env.pop("KB_API_TOKENS", None)
    with kb_serve_process(env, tmp / "serve.log") as base:
        yield base


def test_resolve_on_the_page_then_a_newer_upload_is_a_regression(page, server, receiver):  # noqa: F811
    from playwright.sync_api import expect

    incident = _upload_pasted(page, server, vllm_log(version="0.8.0"))
    wait_until(lambda: any("New crash" in b["text"] for b in receiver.bodies()))
    page.goto(f"{server}/ui/incidents/{incident}")
    expect(page.locator("#status-h")).to_have_text("Status: open")
    page.get_by_label("Resolved in version").fill("0.8.5")
    page.get_by_role("button", name="Resolve", exact=True).click()
    expect(page.locator("#status-h")).to_have_text("Status: resolved")
    expect(page.locator(".flash[role=status]")).to_contain_text("Resolved")

    assert _upload_pasted(page, server, vllm_log(version="0.8.4")) == incident  # older: no
    page.goto(f"{server}/ui/incidents/{incident}")
    expect(page.locator("#status-h")).to_have_text("Status: resolved")
    assert _upload_pasted(page, server, vllm_log(version="0.9.0")) == incident
    page.goto(f"{server}/ui/incidents/{incident}")
    expect(page.locator("#status-h")).to_have_text("Status: regressed")
    expect(page.get_by_role("alert")).to_contain_text("0.8.5")
    _shot(page, "detail-regressed.png")

    page.goto(f"{server}/ui/incidents")
    page.get_by_label("Status").select_option("regressed")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("li.incident")).to_have_count(1)
    expect(page.locator("li.incident .status-regressed")).to_have_text("regressed")

    texts = wait_until(lambda: [b["text"] for b in receiver.bodies() if "Regression" in b["text"]])
    assert len(texts) == 1 and "is back on 0.9.0 (resolved in 0.8.5)" in texts[0]
    page.get_by_role("link", name="Notifications").click()
    expect(page.locator("h1")).to_have_text("Notifications")
    expect(page.locator("table.deliveries").first).to_contain_text("regression")
    assert receiver.url() not in page.content()  # the webhook URL is a secret
    _shot(page, "notifications.png")

    page.goto(f"{server}/ui/incidents/{incident}")
    page.get_by_role("button", name="Reopen").click()
    expect(page.locator("#status-h")).to_have_text("Status: open")
