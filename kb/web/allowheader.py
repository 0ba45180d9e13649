"""`Allow` of an OPTIONS answer names every method of the path. Litestar builds the
OPTIONS handler with the first handler of a path and does not see those added later
(GET and POST /incidents are two handlers), so its `Allow` misses methods; this hook
sets it from the route the request was routed to."""

from __future__ import annotations

from litestar.datastructures import MutableScopeHeaders
from litestar.routes import HTTPRoute
from litestar.types import Message, Scope


async def complete_allow_header(message: Message, scope: Scope) -> None:
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
        return
    template, app = scope.get("path_template"), scope.get("app")
    if template is None or app is None:
        return
    for route in app.routes:
        if isinstance(route, HTTPRoute) and template in (route.path, route.path_format):
            headers = MutableScopeHeaders.from_message(message)
            if "allow" in headers:
                headers["Allow"] = ", ".join(sorted(route.methods))
            return
