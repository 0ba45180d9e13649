"""Turn the service's answer to an upload into the few lines a person reads at 3 a.m.

Pure functions over the JSON answer of `POST /incidents` (no I/O), so the wording is
tested without a server. Every key is optional: an older or newer service, or a partial
answer, still prints something useful instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

MAX_MESSAGE = 240
MAX_DESCRIPTION = 160


def _one_line(text: Any, limit: int) -> str:
    """First non-empty line of `text`, cut at `limit` characters."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if len(first) > limit:
        first = first[: limit - 1].rstrip() + "…"
    elif len(lines) > 1:
        first += " …"
    return first


def _get(mapping: Any, *keys: str) -> Any:
    """mapping[k1][k2]... or None when any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def incident_url(answer: Mapping[str, Any], base_url: str | None = None) -> str | None:
    """The incident's URL, made absolute against the server when the answer is relative."""
    url = _get(answer, "incident", "url")
    if not url:
        return None
    url = str(url)
    if base_url and not url.startswith(("http://", "https://")):
        return urljoin(base_url.rstrip("/") + "/", url.lstrip("/"))
    return url


def root_cause_text(answer: Mapping[str, Any]) -> str | None:
    """`Exception: message [process]`, or None when the service found no root cause."""
    root = _get(answer, "analysis", "root_cause")
    if not isinstance(root, Mapping) or not root.get("exception"):
        return None
    text = str(root["exception"])
    message = _one_line(root.get("message"), MAX_MESSAGE)
    if message:
        text += f": {message}"
    if root.get("process"):
        text += f"  [{root['process']}]"
    return text


def _match_text(answer: Mapping[str, Any]) -> str:
    status = _get(answer, "match", "status")
    score = _get(answer, "match", "score")
    if not status:
        return "answer received"
    text = {"known": "known incident", "similar": "similar incident", "new": "new incident"}.get(
        str(status), f"match: {status}"
    )
    if isinstance(score, int | float) and status != "new":
        text += f" (score {score:.1f})"
    return text


def format_answer(answer: Mapping[str, Any], *, base_url: str | None = None, max_fixes: int = 3) -> str:
    """The full printed answer: root cause, incident and URL, top fixes, recommended path."""
    lines = [f"Crash KB: {_match_text(answer)}"]

    root = root_cause_text(answer)
    lines.append(f"  Root cause:  {root or 'not found in the log (is it truncated?)'}")

    incident = answer.get("incident") if isinstance(answer.get("incident"), Mapping) else None
    if incident:
        title = _one_line(incident.get("title"), MAX_MESSAGE)
        ident = f"#{incident['id']} " if incident.get("id") is not None else ""
        lines.append(f"  Incident:    {ident}{title}".rstrip())
        url = incident_url(answer, base_url)
        if url:
            lines.append(f"               {url}")

    fixes = [fix for fix in answer.get("fixes") or [] if isinstance(fix, Mapping)]
    if fixes:
        lines.append("  Fixes:")
        for number, fix in enumerate(fixes[:max_fixes], start=1):
            kind = f" ({fix['kind']})" if fix.get("kind") else ""
            lines.append(f"    {number}. {_one_line(fix.get('title'), MAX_MESSAGE) or 'untitled fix'}{kind}")
            description = _one_line(fix.get("description"), MAX_DESCRIPTION)
            if description:
                lines.append(f"       {description}")
        if len(fixes) > max_fixes:
            lines.append(f"    … {len(fixes) - max_fixes} more on the incident page")
    else:
        lines.append("  Fixes:       none known yet")

    path = _get(answer, "recommendation", "path")
    if path:
        reason = _one_line(_get(answer, "recommendation", "reason"), MAX_MESSAGE)
        label = {"patch": "patch", "switch_engine": "switch engines", "investigate": "investigate"}.get(
            str(path), str(path)
        )
        lines.append(f"  Recommended: {label}" + (f": {reason}" if reason else ""))
    return "\n".join(lines)


def format_summary(answer: Mapping[str, Any], *, base_url: str | None = None) -> str:
    """One line per delivered log, for `kb flush`."""
    parts = [_match_text(answer)]
    url = incident_url(answer, base_url)
    if url:
        parts.append(url)
    root = root_cause_text(answer)
    if root:
        parts.append(_one_line(root, 120))
    return " | ".join(parts)
