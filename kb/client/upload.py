"""One upload of one log to `POST /incidents`, classified for the caller.

The caller decides what to do with a failure, so this module only says which kind it was:
`transient` (unreachable, timeout, 5xx, 429: spool it and try later), `unauthorized`
(401/403) and `bad_url` (the configuration is wrong: every other log would fail too, keep
the log until it is fixed), `rejected` (any other 4xx: the same bytes will be refused
again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kb.client.settings import incidents_url

DEFAULT_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0
IDEMPOTENCY_HEADER = "Idempotency-Key"


@dataclass(slots=True)
class UploadResult:
    status: str  # ok | transient | unauthorized | bad_url | rejected
    http_status: int | None = None
    answer: dict[str, Any] | None = None
    error: str | None = None
    retry_after: float | None = None  # seconds, from a 429/503 Retry-After header

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def keep_for_later(self) -> bool:
        """Worth spooling: a later attempt (or a fixed configuration) can succeed."""
        return self.status in ("transient", "unauthorized", "bad_url")


def retry_after_seconds(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, the backoff still applies
        return None


def error_detail(response: httpx.Response) -> str:
    """The service's own explanation of an error answer: its JSON `detail` (or `error`,
    `message`), else the body, on one line."""
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict):
        for key in ("detail", "error", "message"):
            if body.get(key):
                body = body[key]
                break
    text = body if isinstance(body, str) else json.dumps(body)
    return " ".join(text.split())


def _error_text(response: httpx.Response) -> str:
    """A refusal, short enough for a terminal."""
    text = error_detail(response)
    return f"HTTP {response.status_code}" + (f": {text[:300]}" if text else "")


def classify(response: httpx.Response) -> UploadResult:
    code = response.status_code
    if 200 <= code < 300:
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            answer = None
        return UploadResult("ok", code, answer=answer)
    if code >= 500 or code in (408, 425, 429):
        return UploadResult("transient", code, error=_error_text(response), retry_after=retry_after_seconds(response))
    if code in (401, 403):
        return UploadResult("unauthorized", code, error=_error_text(response))
    if 300 <= code < 400:
        where = response.headers.get("Location", "?")
        return UploadResult("rejected", code, error=f"HTTP {code}: the server redirects to {where}; use that URL")
    return UploadResult("rejected", code, error=_error_text(response))


def upload(
    server: str,
    log: Path | bytes,
    fields: dict[str, str],
    *,
    token: str | None = None,
    idempotency_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    filename: str | None = None,
) -> UploadResult:
    """Send one log as multipart field `log` with `fields` next to it. Never raises for
    network or HTTP trouble: that is what the result says."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if idempotency_key:
        headers[IDEMPOTENCY_HEADER] = idempotency_key
    name = filename or (log.name if isinstance(log, Path) else "crash.log")
    timeouts = httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout))
    try:
        with httpx.Client(timeout=timeouts, follow_redirects=False) as client:
            if isinstance(log, Path):
                with log.open("rb") as handle:
                    response = client.post(
                        incidents_url(server),
                        data=fields,
                        files={"log": (name, handle, "text/plain")},
                        headers=headers,
                    )
            else:
                response = client.post(
                    incidents_url(server), data=fields, files={"log": (name, log, "text/plain")}, headers=headers
                )
    except httpx.TimeoutException as exc:
        return UploadResult("transient", error=f"timed out talking to {server} ({type(exc).__name__})")
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        return UploadResult("bad_url", error=f"invalid server URL {server!r}: {exc}")
    except httpx.TransportError as exc:
        return UploadResult("transient", error=f"cannot reach {server}: {exc or type(exc).__name__}")
    return classify(response)
