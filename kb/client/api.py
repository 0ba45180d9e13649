"""`kb.Client`: the service half of the public Python API (docs/python-api.md).

A synchronous client of the JSON API (kb/web/api.py) over one `httpx.Client`. Answers
are decoded into the very dataclasses the service answers with (kb.web.links: the
service's structs with their links), keys unknown to this version ignored, so a newer
service never breaks an older client.

Timeouts and retries are the CLI's (kb/client/upload.py, kb/client/flush.py): 60 s a
request, 10 s to connect; transient failures (unreachable, timeouts, 5xx, 408/425/429)
retried with doubling, jittered backoff that a longer Retry-After overrides. An upload
carries one Idempotency-Key for all its attempts, so a retry after a lost answer never
stores the log twice. Any other refusal raises at once with the service's `detail`."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec

import kb
from kb.api import LogInput, log_bytes
from kb.client.errors import ClientError, NotFound, Refused, Unauthorized, Unavailable, Unreachable
from kb.client.flush import backoff_delay
from kb.client.redaction import redact_bytes, redact_fields, redact_file
from kb.client.settings import base_url
from kb.client.upload import (
    CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    IDEMPOTENCY_HEADER,
    error_detail,
    retry_after_seconds,
)
from kb.services.views import OVERRIDE_FIELDS
from kb.web.links import IncidentDetail, IncidentList, UploadResult

T = TypeVar("T")

# The optional upload fields: they override what the log says (the caller knows better).
UPLOAD_FIELDS = OVERRIDE_FIELDS
TRANSIENT_STATUS = (408, 425, 429)
MAX_DETAIL = 1000


def _detail(response: httpx.Response) -> str:
    text = error_detail(response)
    return text[:MAX_DETAIL] or (response.reason_phrase or f"HTTP {response.status_code}")


def _refusal(response: httpx.Response) -> Refused:
    code, url = response.status_code, str(response.request.url)
    if 300 <= code < 400:
        where = response.headers.get("Location", "?")
        return Refused(f"the server redirects to {where}; use that URL", status_code=code, url=url)
    kind = Unauthorized if code in (401, 403) else NotFound if code == 404 else Refused
    return kind(_detail(response), status_code=code, url=url)


class Client:
    """A Crash KB service at `url` (its base URL, or its /incidents URL).

    `token` is sent as `Authorization: Bearer <token>` (needed for uploads when the
    service sets KB_API_TOKENS). `timeout` bounds each attempt (connecting: at most 10 s);
    a transient failure is retried `retries` times after `backoff`, 2x`backoff`, ...
    seconds (jittered, at most 60 s; a longer Retry-After wins). Use it as a context
    manager, or call `close()`."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = 4, backoff: float = 1.0) -> None:
        self.url = base_url(url)
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"a Crash KB URL starts with http:// or https://, got {url!r}")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError("timeout must be positive, retries and backoff not negative")
        self.retries = retries
        self.backoff = backoff
        headers = {"Accept": "application/json", "User-Agent": f"crash-kb-python/{kb.__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            self._http = httpx.Client(base_url=self.url, headers=headers, follow_redirects=False,
                                      timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)))
        except httpx.InvalidURL as exc:
            raise ValueError(f"invalid Crash KB URL {url!r}: {exc}") from None
        self._decoders: dict[type, msgspec.json.Decoder] = {}

    # -- the API ----------------------------------------------------------------------

    def submit(self, log: LogInput, *, idempotency_key: str | None = None,
               **fields: str | int | None) -> UploadResult:
        """POST /incidents: store the log as an occurrence of the incident it matches (or
        of a new one) and return the service's answer: incident, match, known fixes,
        recommendation. `fields` (engine, model, gpu, tp, exit_code, command, ... see
        UPLOAD_FIELDS) override what the log says; None is left out. All attempts carry
        the same Idempotency-Key (`idempotency_key`, a fresh one by default): pass the
        same key again to make a later resend of the same report store nothing."""
        key = idempotency_key or uuid.uuid4().hex
        return self._upload("/incidents", log, fields, {IDEMPOTENCY_HEADER: key})

    def analyze(self, log: LogInput, **fields: str | int | None) -> UploadResult:
        """POST /analyze: the service's analysis and match of the log, with the known
        fixes and the recommendation, storing nothing (`incident` is the matched incident
        or None; `occurrence` is None)."""
        return self._upload("/analyze", log, fields, {})

    def incident(self, incident_id: int) -> IncidentDetail:
        """GET /incidents/{id}: one incident with its occurrences, fixes, similar
        incidents and recommendation. Raises `kb.NotFound` when there is none."""
        if isinstance(incident_id, bool) or not isinstance(incident_id, int):
            raise TypeError(f"an incident id is an int, not {type(incident_id).__name__}")
        return self._decode(self._send("GET", f"/incidents/{incident_id}"), IncidentDetail)

    def search(self, q: str | None = None, *, engine: str | None = None, version: str | None = None,
               model_arch: str | None = None, gpu: str | None = None, phase: str | None = None,
               has_fix: bool | None = None, path: str | None = None, tag: str | None = None,
               sort: str = "last_seen", page: int = 1, per_page: int = 50,
               view: str | None = None) -> IncidentList:
        """GET /incidents: incidents whose title, signature, summary, notes or stored
        logs hold `q` (log hits carry `log_match`), filtered by engine, engine version,
        model arch (HF model_type), GPU (name or family), crash phase, having a fix,
        recommended path (patch | switch_engine | investigate), tag and view (seen_here |
        seeded | needs_triage); sorted by last_seen | occurrences | created | id | title |
        relevance."""
        params: dict[str, str | int] = {"sort": sort, "page": page, "per_page": per_page}
        for name, value in (("q", q), ("engine", engine), ("version", version),
                            ("model_arch", model_arch), ("gpu", gpu), ("phase", phase),
                            ("path", path), ("tag", tag), ("view", view)):
            if value is not None:
                params[name] = value
        if has_fix is not None:
            params["has_fix"] = "true" if has_fix else "false"
        return self._decode(self._send("GET", "/incidents", params=params), IncidentList)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"kb.Client({self.url!r})"

    # -- plumbing ---------------------------------------------------------------------

    def _upload(self, route: str, log: LogInput, fields: dict[str, str | int | None],
                headers: dict[str, str]) -> UploadResult:
        unknown = sorted(set(fields) - set(UPLOAD_FIELDS))
        if unknown:
            raise TypeError(f"unknown upload field(s) {', '.join(unknown)}; "
                            f"the service takes {', '.join(UPLOAD_FIELDS)}")
        form = redact_fields({name: str(value) for name, value in fields.items() if value is not None})
        return self._decode(self._send("POST", route, data=form, log=log, headers=headers),
                            UploadResult)

    @contextmanager
    def _log_part(self, log: LogInput) -> Iterator[dict[str, Any]]:
        """The multipart `log` part, opened afresh for each attempt. Its secrets are
        masked before it is sent (kb.client.redaction; a gzip log goes inflated): a file
        is redacted into a temporary file, a chunk at a time."""
        if isinstance(log, os.PathLike):
            path = Path(log)
            with tempfile.TemporaryFile(prefix="kb-redacted-") as handle:
                redact_file(path, handle)
                handle.seek(0)
                yield {"log": (path.name, handle, "text/plain")}
            return
        data = redact_bytes(log_bytes(log))  # a str is the log's text (and refused when it names a file)
        yield {"log": ("crash.log", data, "text/plain")}

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              data: dict[str, str] | None = None, log: LogInput | None = None,
              headers: dict[str, str] | None = None) -> httpx.Response:
        """One request with the retries: the 2xx answer, or the error to raise."""
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            cause: Exception | None = None
            try:
                with self._log_part(log) if log is not None else nullcontext(None) as files:
                    response = self._http.request(method, path, params=params, data=data,
                                                  files=files, headers=headers)
            except httpx.TimeoutException as exc:
                failure: ClientError = Unreachable(
                    f"timed out talking to {self.url} ({type(exc).__name__})", url=self.url)
                cause = exc
            except httpx.TransportError as exc:
                failure = Unreachable(f"cannot reach {self.url}: {exc or type(exc).__name__}", url=self.url)
                cause = exc
            else:
                code = response.status_code
                if 200 <= code < 300:
                    return response
                if code < 500 and code not in TRANSIENT_STATUS:
                    raise _refusal(response)
                failure = Unavailable(_detail(response), status_code=code, url=str(response.request.url))
                retry_after = retry_after_seconds(response)
            if attempt > self.retries:
                if attempt > 1:
                    failure.args = (f"{failure.args[0]} (after {attempt} attempts)",)
                raise failure from cause
            time.sleep(backoff_delay(attempt, self.backoff, retry_after))

    def _decode(self, response: httpx.Response, kind: type[T]) -> T:
        decoder = self._decoders.get(kind)
        if decoder is None:
            decoder = self._decoders[kind] = msgspec.json.Decoder(kind)
        try:
            return decoder.decode(response.content)  # type: ignore[no-any-return]
        except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
            raise ClientError(f"the answer of {response.request.url} is not the JSON a Crash KB "
                              f"service sends ({exc})", status_code=response.status_code,
                              url=str(response.request.url)) from None
