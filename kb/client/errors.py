"""What `kb.Client` raises. Kept apart from the client (no httpx here), so `except
kb.ClientError` costs nothing to a script that never talks to a server."""

from __future__ import annotations


class ClientError(Exception):
    """A request to the Crash KB service failed. `detail` is the service's own words
    when it answered (its JSON `detail`), else what went wrong; `status_code` is the
    HTTP status of the last answer (None when none came)."""

    def __init__(self, detail: str, *, status_code: int | None = None, url: str | None = None) -> None:
        self.detail = detail
        self.status_code = status_code
        self.url = url
        super().__init__(f"HTTP {status_code}: {detail}" if status_code is not None else detail)


class Unreachable(ClientError):
    """No answer after every retry: connection refused, DNS failure, timeouts."""


class Unavailable(ClientError):
    """The service kept answering with a transient error (5xx, 408, 425, 429) until the
    retries ran out. Nothing was stored by the failed attempts."""


class Refused(ClientError):
    """The service refused the request (a 4xx other than 408/425/429, or a redirect):
    the same request would be refused again, so it was not retried."""


class Unauthorized(Refused):
    """401/403: the write needs `token=` (the service has KB_API_TOKENS set), or the
    token is wrong."""


class NotFound(Refused):
    """404: no incident with that id."""
