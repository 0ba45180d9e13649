"""Which form an answer takes: JSON for programs, text for terminals, HTML for browsers.

The rule, in order (documented in the README and the OpenAPI descriptions):
1. `?format=json|text|html` wins.
2. Otherwise the first media type of `Accept`, by its q-value, that names one:
   `application/json` -> JSON, `text/html` / `application/xhtml+xml` -> HTML,
   `text/plain` or `text/*` -> text.
3. `Accept` missing or only `*/*` (what curl, wget, httpx and requests send): text for a
   terminal tool (curl, wget, HTTPie, xh), JSON for anything else, so scripts that never
   set `Accept` keep receiving the JSON they always did.
The launch wrapper and the Python client send `Accept: application/json`.
"""

from __future__ import annotations

from typing import Literal, get_args

from litestar.datastructures.headers import Accept

AnswerFormat = Literal["json", "text", "html"]
FORMATS: tuple[str, ...] = get_args(AnswerFormat)
TERMINAL_AGENTS = ("curl/", "wget/", "httpie/", "xh/")
_BY_MEDIA_TYPE: dict[str, AnswerFormat] = {
    "application/json": "json",
    "application/*": "json",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/plain": "text",
    "text/*": "text",
}
VARY = "Accept, User-Agent"  # the answer differs by these: shared caches must know
FORMAT_DOC = ("Answer as `json`, `text` (a report for terminals) or `html` (the page). "
              "Default: by `Accept`; with no preference, text for curl/wget/HTTPie and "
              "JSON for other clients.")


def answer_format(explicit: AnswerFormat | None, accept: str | None,
                  user_agent: str | None) -> AnswerFormat:
    if explicit:
        return explicit
    for value in Accept(accept or "*/*"):
        media_type = value.split(";", 1)[0].strip().lower()
        if media_type in _BY_MEDIA_TYPE:
            return _BY_MEDIA_TYPE[media_type]
        if media_type == "*/*":
            break  # no preference left that we could honour
    agent = (user_agent or "").lower()
    return "text" if agent.startswith(TERMINAL_AGENTS) else "json"
