"""Delivering the outbox: a background task of each service process (started with the
app, kb.web.notifications), never the upload's request path.

The task claims due notifications (kb.db.outbox: a lease, SKIP LOCKED on Postgres, so
`--workers N` processes share the outbox without sending a row twice), posts them with
httpx (short timeouts, no redirects, no proxies from the environment), logs every attempt
and schedules failures again with exponential backoff. It wakes when an upload commits
notifications and otherwise polls, so retries and other processes' rows are seen too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from time import perf_counter

import anyio.to_thread
import httpx

from kb import __version__
from kb.config import Settings
from kb.core.redact import redact_field
from kb.db import outbox
from kb.db.models import utcnow
from kb.db.session import Database
from kb.services.views import DeliveryLog, DeliveryView, NotificationView
from kb.services.webhooks import WebhookTarget, body_for, parse_targets

log = logging.getLogger("kb.delivery")
BATCH = 20  # notifications claimed (and sent concurrently) at once
MAX_POLL_SECONDS = 1.0
# Settled notifications and their attempts are kept this long, then pruned (hourly).
RETENTION = timedelta(days=30)
PRUNE_EVERY = timedelta(hours=1)


class Deliverer:
    """The delivery loop of one process."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.targets: dict[str, WebhookTarget] = {t.key: t for t in parse_targets(settings.webhooks)}
        self.timeout = settings.webhook_timeout
        self.retry_first = settings.webhook_retry_seconds
        self.max_attempts = settings.webhook_max_attempts
        self.poll = min(MAX_POLL_SECONDS, settings.webhook_retry_seconds)
        # Longer than any attempt can take, so a live process never loses its claim.
        self.lease = timedelta(seconds=3 * settings.webhook_timeout + 30)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def wake(self) -> None:
        """Deliver now (from any thread: called after an upload's commit)."""
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(event.set)

    async def run(self) -> None:
        self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
        timeout = httpx.Timeout(self.timeout)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False,
                                     trust_env=False) as client:
            pruned_at = utcnow() - PRUNE_EVERY
            while True:
                try:
                    if utcnow() - pruned_at >= PRUNE_EVERY:
                        pruned_at = utcnow()
                        await anyio.to_thread.run_sync(self.prune)
                    sent = await self.deliver_due(client)
                except Exception as exc:  # the database is down, ...: log and poll again
                    log.warning("delivering notifications failed (%s: %s); retrying",
                                type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                    sent = 0
                if not sent:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._event.wait(), self.poll)
                    self._event.clear()

    async def deliver_due(self, client: httpx.AsyncClient) -> int:
        claimed = await anyio.to_thread.run_sync(self._claim)
        if claimed:
            await asyncio.gather(*(self._deliver(client, c) for c in claimed))
        return len(claimed)

    def prune(self) -> int:
        """Forget settled notifications older than RETENTION."""
        with self.db.write() as session:
            return outbox.prune(session, utcnow() - RETENTION)

    def _claim(self) -> list[outbox.Claimed]:
        now = utcnow()
        with self.db.read() as session:
            if not outbox.any_due(session, now):
                return []
        with self.db.write() as session:
            return outbox.claim(session, now, self.lease, BATCH)

    async def _deliver(self, client: httpx.AsyncClient, claimed: outbox.Claimed) -> None:
        target = self.targets.get(claimed.target)
        started = perf_counter()
        status_code: int | None = None
        if target is None:
            ok, error = False, "this webhook is no longer configured (KB_WEBHOOKS)"
        else:
            try:
                response = await client.post(
                    target.url, json=body_for(target, claimed.payload),
                    headers={"User-Agent": f"crash-kb/{__version__}",
                             "X-KB-Event": str(claimed.payload.get("event")),
                             "X-KB-Event-Id": str(claimed.payload.get("event_id"))})
                status_code, ok = response.status_code, 200 <= response.status_code < 300
                error = None if ok else f"HTTP {status_code}: {response.text[:200]}"
            except httpx.HTTPError as exc:
                ok, error = False, f"{type(exc).__name__}: {exc}".replace(target.url, target.label)
        if error:
            log.info("webhook %s: %s attempt %d failed: %s",
                     target.label if target else claimed.target, claimed.payload.get("event"),
                     claimed.attempt, error)
        elapsed = (perf_counter() - started) * 1000
        await anyio.to_thread.run_sync(self._record, claimed.id, ok, status_code,
                                       redact_field(error)[:1000] if error else None, elapsed,
                                       target is None)

    def _record(self, outbox_id: int, ok: bool, status_code: int | None, error: str | None,
                duration_ms: float, give_up: bool) -> None:
        with self.db.write() as session:
            outbox.record_attempt(session, outbox_id, ok=ok, status_code=status_code,
                                  error=error, duration_ms=duration_ms, now=utcnow(),
                                  retry_first=self.retry_first,
                                  max_attempts=self.max_attempts, give_up=give_up)


def delivery_log(db: Database, settings: Settings, *, limit: int = 100) -> DeliveryLog:
    """The newest notifications and delivery attempts (GET /notifications, the page)."""
    with db.read() as session:
        notes = outbox.recent_notifications(session, limit)
        deliveries = outbox.recent_deliveries(session, limit)
        return DeliveryLog(
            webhooks=[t.label for t in parse_targets(settings.webhooks)],
            notifications=[NotificationView(
                id=n.id, event=n.event, event_id=n.event_id, incident_id=n.incident_id,
                target=n.target_label, status=n.status, attempts=n.attempts,
                next_attempt_at=n.next_attempt_at if n.status == "pending" else None,
                last_status_code=n.last_status_code, last_error=n.last_error,
                created_at=n.created_at, delivered_at=n.delivered_at) for n in notes],
            deliveries=[DeliveryView(
                id=d.id, notification_id=n.id, event=n.event, event_id=n.event_id,
                incident_id=n.incident_id, target=n.target_label, attempt=d.attempt, ok=d.ok,
                status_code=d.status_code, error=d.error, duration_ms=d.duration_ms,
                created_at=d.created_at, notification_status=n.status)
                for d, n in deliveries])


__all__ = ["Deliverer", "delivery_log"]
