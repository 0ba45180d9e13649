"""Webhook targets (KB_WEBHOOKS) and what is posted to them.

A target's URL is a secret (a Slack incoming-webhook URL holds its token in the path):
it lives only in the settings. The outbox stores a hash of it (`key`, to find the target
again when delivering) and a label of scheme and host for people.

Two formats: `json` posts the event as stored (`event`, `event_id`, `incident`, ...);
`slack` posts `{"text": ...}`, which Slack, Mattermost, Rocket.Chat and Discord's
/slack endpoint all accept.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kb.config import webhook_parts
from kb.core.redact import redact_field

EVENTS = ("new_incident", "regression", "spike")


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    key: str  # sha256 of the URL, shortened: what the outbox stores
    format: str  # json | slack
    url: str
    label: str  # `slack https://hooks.slack.com/…`: scheme and host only


def target_label(form: str, url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    rest = "/…" if parts.path.strip("/") or parts.query else ""
    return redact_field(f"{form} {parts.scheme}://{host}{port}{rest}")[:300]


def parse_target(entry: str) -> WebhookTarget:
    """One KB_WEBHOOKS entry, `[FORMAT=]URL` (kb.config checked its form)."""
    form, url = webhook_parts(entry)
    key = hashlib.sha256(f"{form} {url}".encode()).hexdigest()[:32]
    return WebhookTarget(key=key, format=form, url=url, label=target_label(form, url))


def parse_targets(entries: tuple[str, ...]) -> tuple[WebhookTarget, ...]:
    targets = {t.key: t for t in map(parse_target, entries)}  # a target listed twice: once
    return tuple(targets.values())


def event_text(payload: dict[str, Any]) -> str:
    """The one-line message of an event, for chat (the `slack` format)."""
    incident = payload.get("incident") or {}
    ref = f"#{incident.get('id')} {incident.get('title', '')}".strip()
    url = incident.get("url") or ""
    event = payload.get("event")
    if event == "new_incident":
        head = f"New crash: {ref}"
    elif event == "regression":
        version = (payload.get("occurrence") or {}).get("engine_version") or "an unknown version"
        resolved = incident.get("resolved_in")
        since = f" (resolved in {resolved})" if resolved else " (resolved)"
        head = f"Regression: {ref} is back on {version}{since}"
    elif event == "spike":
        spike = payload.get("spike") or {}
        head = (f"Spike: {ref}: {spike.get('occurrences')} occurrences in the last hour "
                f"(threshold {spike.get('threshold')})")
    else:
        head = f"{event}: {ref}"
    return f"Crash KB: {head}" + (f" <{url}>" if url else "")


def body_for(target: WebhookTarget, payload: dict[str, Any]) -> dict[str, Any]:
    """What is posted to `target` for a stored event."""
    if target.format == "slack":
        return {"text": event_text(payload)}
    return payload


__all__ = ["EVENTS", "WebhookTarget", "body_for", "event_text", "parse_target",
           "parse_targets", "target_label"]
