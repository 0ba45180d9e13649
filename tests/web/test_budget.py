"""The server-wide bound on upload memory: a request that finds the budget spent waits
its turn, then gets 503; a request alone may hold the whole budget; what a request held
is given back when it ends, whatever happened."""

from __future__ import annotations

import anyio
import pytest

from kb.services.errors import Unavailable
from kb.web.budget import ByteBudget
from tests.service.helpers import api_client, upload
from tests.service.logs import vllm_log


def test_a_request_waits_until_another_gives_its_bytes_back():
    async def scenario() -> list[str]:
        budget, events = ByteBudget(100, wait=5), []

        async def first() -> None:
            async with budget.reservation() as held:
                await held.take(80)
                events.append("first holds 80")
                await anyio.sleep(0.2)
            events.append("first done")

        async def second() -> None:
            await anyio.sleep(0.05)
            async with budget.reservation() as held:
                await held.take(50)
                events.append(f"second holds 50 (used {budget.used})")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(first)
            tasks.start_soon(second)
        assert budget.used == 0
        return events

    assert anyio.run(scenario) == ["first holds 80", "first done", "second holds 50 (used 50)"]


def test_alone_a_request_may_hold_the_whole_budget_and_a_queue_times_out():
    async def scenario() -> None:
        budget = ByteBudget(100, wait=0.1)
        async with budget.reservation() as big:
            await big.take(250)  # more than the budget: alone, it proceeds with all of it
            assert budget.used == 100
            with pytest.raises(Unavailable, match="KB_MAX_INFLIGHT_MB"):
                async with budget.reservation() as other:
                    await other.take(1)
        assert budget.used == 0

    anyio.run(scenario)


def test_an_upload_that_finds_the_budget_spent_gets_503_then_succeeds(db):
    with api_client(db, upload_queue_seconds=0.3) as client:
        budget = client.app.state.budget
        budget.used = budget.total  # other uploads hold everything
        refused = upload(client, vllm_log())
        assert refused.status_code == 503 and refused.headers["retry-after"]
        assert "KB_MAX_INFLIGHT_MB" in refused.json()["detail"]
        budget.used = 0
        assert upload(client, vllm_log()).status_code == 201
        assert budget.used == 0  # every byte given back
