"""Keep other sites' pages, open in the team's browsers, away from the KB: they must not
write to it (cross-site request forgery) nor read it through a name of their own that
they point at 127.0.0.1 (DNS rebinding).

Writes: without KB_API_TOKENS the service takes writes from anyone who can reach it, and
any page can post a form to 127.0.0.1. Browsers say where a request comes from
(`Sec-Fetch-Site`, else `Origin`); a write from another origin is refused. Requests with
neither header (curl, the launch wrapper, httpx) are not from a browser and pass. This is
the rule of Go's net/http CrossOriginProtection and of the Fetch Metadata guidance.

Reads: a rebinding page is same-origin with itself, so the only tell is the Host header
naming the attacker's domain. When `kb serve` binds a loopback address (the default),
the Host must name a loopback host, or one of KB_ALLOWED_HOSTS.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException, NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from kb.config import Settings
from kb.web.api import reads_allowed

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_cross_origin_write(method: str, headers: Mapping[str, str]) -> bool:
    """True when a browser sent this unsafe request from another origin."""
    if method in SAFE_METHODS:
        return False
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")  # "none": typed by the user
    origin = headers.get("origin")
    if origin is None:
        return False  # not a browser, or one too old to say; tokens still apply
    return origin.partition("://")[2] != headers.get("host", "")


def host_name(host_header: str) -> str:
    """The name in a Host header: `kb.example.com:8000` -> `kb.example.com`,
    `[::1]:8000` -> `::1`."""
    if host_header.startswith("["):
        return host_header[1:].partition("]")[0].lower()
    return host_header.partition(":")[0].lower()


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address.lower() == "localhost"


def allowed_host_names(settings: Settings) -> frozenset[str] | None:
    """The names requests may address; None: any (a public bind, or `*`)."""
    if settings.allowed_hosts:
        if "*" in settings.allowed_hosts:
            return None
        return frozenset(host_name(h) for h in settings.allowed_hosts)
    return LOOPBACK_NAMES if _is_loopback(settings.host) else None


def check_host(names: frozenset[str] | None, headers: Mapping[str, str]) -> None:
    if names is None:
        return
    name = host_name(headers.get("host", ""))
    if name not in names:
        raise HTTPException(
            status_code=400,
            detail=f"this server does not answer to the host name {name!r}; it answers to "
                   f"{', '.join(sorted(names))} (add a proxy's names to KB_ALLOWED_HOSTS)")


class SignInRequired(NotAuthorizedException):
    """A page read while KB_PROTECT_READS is set and the browser has not signed in: it
    is sent to the sign-in page, which brings it back."""

    def __init__(self, path: str) -> None:
        super().__init__(detail="sign in to read this knowledge base (KB_PROTECT_READS is set)")
        self.next = path


async def refuse_other_sites(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """App-wide guard. Async: Litestar runs a sync guard in a worker thread."""
    check_host(connection.app.state.allowed_host_names, connection.headers)
    if not reads_allowed(connection):
        path = connection.scope.get("path", "")
        if path == "/" or path.startswith("/ui"):
            raise SignInRequired(path)
        raise NotAuthorizedException(detail="this read needs Authorization: Bearer <token> "
                                            "(KB_PROTECT_READS is set)",
                                     headers={"WWW-Authenticate": 'Bearer realm="crash-kb"'})
    if is_cross_origin_write(connection.scope.get("method", "GET"), connection.headers):
        raise PermissionDeniedException(
            "cross-origin write refused: this request came from a page of another site")
