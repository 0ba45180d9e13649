"""Refuse writes that a browser makes on behalf of another site (cross-site request
forgery), by the headers browsers send: `Sec-Fetch-Site`, else `Origin`.

Without KB_API_TOKENS the service takes writes from anyone who can reach it, and a page
on any site the team visits can reach 127.0.0.1: a form posted from there would merge
incidents or add fixes. With tokens, the UI's SameSite=Strict cookie already stays home,
but this costs nothing and covers both. Requests without either header (curl, the
launch wrapper, httpx) are not from a browser and pass. The rule is the one of Go's
net/http CrossOriginProtection and of the Fetch Metadata guidance.
"""

from __future__ import annotations

from collections.abc import Mapping

from litestar.connection import ASGIConnection
from litestar.exceptions import PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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


async def refuse_cross_origin_writes(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """App-wide guard. Async: Litestar runs a sync guard in a worker thread."""
    if is_cross_origin_write(connection.scope.get("method", "GET"), connection.headers):
        raise PermissionDeniedException(
            "cross-origin write refused: this request came from a page of another site")
