"""The dashboard in a real browser: Playwright drives Debian's Chromium against a real
`kb serve` on an SQLite knowledge base holding two weeks of uploads. The page renders its
charts (inline SVG) with no content-policy violation and no script; screenshots (laptop
and phone widths) land in /tmp/shots-dashboard/ for a human to look at.

Without Chromium: FAIL under CI=true, skip otherwise (as tests/web/test_browser.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import kb_serve_process
from tests.service.logs import HEADS, NCCL, vllm_log
from tests.web.test_browser import _need_chromium, browser  # noqa: F401

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("KB_DASHBOARD_SHOTS", "/tmp/shots-dashboard"))

# (log, upload fields, days ago of each upload)
WEEKS = [
    (vllm_log(), {"engine_version": "0.11.0", "gpu": "NVIDIA H100 80GB HBM3", "model_arch": "kimi_k2"},
     [0, 0, 1, 2, 2, 3, 5, 9, 12]),
    (vllm_log(**NCCL), {"engine_version": "0.10.1", "gpu": "NVIDIA A100-SXM4-80GB", "model_arch": "llama"},
     [0, 1, 4]),
    (vllm_log(**HEADS), {"engine_version": "0.9.2", "gpu": "NVIDIA L40S", "model_arch": "qwen3"},
     [8, 9, 10, 11, 13]),
    (vllm_log(exception="RuntimeError", message="CUDA error: an illegal memory access was encountered"),
     {"engine_version": "0.11.0", "gpu": "NVIDIA B200", "model_arch": "deepseek_v3"}, [0, 2, 6, 8]),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _need_chromium()
    tmp = tmp_path_factory.mktemp("dash")
    url = f"sqlite:///{tmp}/kb.db"
    env = {**os.environ, "KB_DATABASE_URL": url, "KB_SEED": "0", "KB_LOG_LEVEL": "warning"}
    env.pop("KB_API_TOKENS", None)
    with kb_serve_process(env, tmp / "serve.log") as base:
        moves = []
        for log, fields, days in WEEKS:
            for n, days_ago in enumerate(days):
                answer = httpx.post(f"{base}/incidents", files={"log": ("vllm.log", log.encode())},
                                    data={**fields, "reporter": f"run-{n}"},
                                    headers={"Accept": "application/json"}, timeout=30).json()
                moves.append((answer["occurrence"]["id"], answer["incident"]["id"], days_ago))
        engine = create_engine(url)
        with engine.begin() as conn:  # the uploads as if made over two weeks
            for occurrence, incident, days_ago in moves:
                when = (datetime.now(UTC) - timedelta(days=days_ago, minutes=5)).replace(tzinfo=None)
                conn.execute(text("UPDATE occurrences SET created_at = :t WHERE id = :o"), {"t": when, "o": occurrence})
            conn.execute(text("UPDATE incidents SET first_seen = (SELECT MIN(created_at) FROM occurrences "
                              "WHERE occurrences.incident_id = incidents.id)"))
        engine.dispose()
        yield base


def test_the_dashboard_renders_its_charts(browser, server):
    from playwright.sync_api import expect

    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    failed: list[str] = []  # the browser asks for /favicon.ico by itself; the KB has none
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)
    page.set_default_timeout(15_000)

    page.goto(f"{server}/ui/incidents")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboard").click()
    expect(page).to_have_url(f"{server}/ui/dashboard")
    expect(page.get_by_role("heading", name="This week's crashes")).to_be_visible()

    daily = page.locator('svg[data-chart="daily"]')
    expect(daily).to_be_visible()
    expect(daily.locator("rect")).to_have_count(13)  # every day with an upload but one (7 days ago)
    assert daily.bounding_box()["height"] > 100  # type: ignore[index]
    for chart in ("versions", "gpus", "archs", "split"):
        expect(page.locator(f'svg[data-chart="{chart}"]')).to_be_visible()
    gpus = page.locator('svg[data-chart="gpus"]')
    for family in ("hopper", "ampere", "ada", "blackwell"):
        expect(gpus.locator("text.lbl", has_text=family)).to_have_count(1)
    # the bars are coloured by the stylesheet: the policy let kb.css apply
    fill = page.locator('svg[data-chart="daily"] rect.cur').first.evaluate("e => getComputedStyle(e).fill")
    assert fill == "rgb(11, 92, 173)", fill

    top = page.locator("table.dash-top").first.locator("tbody tr")
    expect(top).to_have_count(3)
    expect(top.first).to_contain_text("No available memory for the cache blocks")
    expect(top.first.locator(".trend")).to_have_text("▲ 5")  # 7 this week, 2 the week before
    expect(page.get_by_text("New vs recurring incidents")).to_be_visible()
    page.screenshot(path=str(SHOTS / "dashboard.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(daily).to_be_visible()
    page.screenshot(path=str(SHOTS / "dashboard-phone.png"), full_page=True)
    context.close()
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
    assert not failed, failed
    assert not [p for p in problems if not p.startswith("Failed to load resource")], problems
