"""The service's answers as text a person reads in a terminal at 3 a.m.

One set of pure functions over the JSON form of the answers (kb.services.views turned
into builtins), used by the server for `curl` and `Accept: text/plain` and by
`kb submit`, `kb flush`, `kb run`, `kb show` and `kb search`: the same crash reads the
same everywhere. Root cause first, then the recommendation and every fix with its exact
change. Lines fit a 100-column terminal; every report ends with a newline.

Every key is optional: an older or newer service, or a partial answer, still prints
something useful instead of a traceback.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urljoin

WIDTH = 100
MESSAGE_LINES = 12  # of a root-cause message; the page has the rest
DIFF_LINES = 40
SIMILAR_SHOWN = 5
OCCURRENCES_SHOWN = 5
PATH_LABELS = {"patch": "patch", "switch_engine": "switch engines", "investigate": "investigate"}
STATUS_WORDS = {"known": "known incident", "similar": "similar incident", "new": "new incident"}


def _get(mapping: Any, *keys: str) -> Any:
    """mapping[k1][k2]... or None when any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _cut(text: Any, width: int) -> str:
    """One line of at most `width` characters (its indentation kept)."""
    text = " ".join(str(text or "").splitlines()).rstrip()
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _wrap(text: Any, indent: str, *, max_lines: int | None = None) -> list[str]:
    """Paragraphs of `text` wrapped to WIDTH behind `indent`; blank lines kept once."""
    out: list[str] = []
    for paragraph in str(text or "").strip().split("\n\n"):
        body = " ".join(paragraph.split())
        if not body:
            continue
        if out:
            out.append("")
        out.extend(indent + line
                   for line in textwrap.wrap(body, WIDTH - len(indent), break_on_hyphens=False))
    if max_lines is not None and len(out) > max_lines:
        hidden = len(out) - max_lines + 1
        out = out[: max_lines - 1] + [f"{indent}… {hidden} more line(s) on the incident page"]
    return out


def _code(lines: Iterable[str], indent: str, limit: int) -> list[str]:
    """Code or a diff, line by line (never re-wrapped); long lines cut, long blocks too."""
    rows = [line.rstrip() for line in lines]
    out = [indent + (row if len(indent) + len(row) <= WIDTH else row[: WIDTH - len(indent) - 1] + "…")
           for row in rows[:limit]]
    if len(rows) > limit:
        out.append(f"{indent}… {len(rows) - limit} more line(s) on the incident page")
    return out


def absolute_url(url: Any, base_url: str | None) -> str | None:
    """`url`, made absolute against the server when the answer gave a relative one."""
    if not url:
        return None
    url = str(url)
    if base_url and not url.startswith(("http://", "https://")):
        return urljoin(base_url.rstrip("/") + "/", url.lstrip("/"))
    return url


def _error_lines(exception: Any, message: Any) -> list[str]:
    """`Exception: message` as printed: the message's own line breaks kept, each line
    wrapped, continuation lines indented under the first."""
    first, *rest = str(message or "").strip().splitlines() or [""]
    text = f"{exception}: {first.strip()}" if exception and first.strip() else str(exception or first)
    out = textwrap.wrap(text, WIDTH - 2, break_on_hyphens=False, initial_indent="  ",
                        subsequent_indent="    ")
    for line in rest:
        out.extend(textwrap.wrap(line.strip(), WIDTH - 4, break_on_hyphens=False,
                                 initial_indent="    ", subsequent_indent="    ") or [""])
    if len(out) > MESSAGE_LINES:
        out = out[: MESSAGE_LINES - 1] + [f"    … {len(out) - MESSAGE_LINES + 1} more line(s)"]
    return out


def _context_line(context: Any, phase: Any) -> str | None:
    if not isinstance(context, Mapping):
        context = {}
    parts = [" ".join(str(x) for x in (context.get("engine"), context.get("engine_version")) if x)]
    model = context.get("model")
    arch = context.get("model_arch")
    parts.append(" ".join(x for x in (str(model) if model else "", f"({arch})" if arch else "") if x))
    gpu = context.get("gpu") if isinstance(context.get("gpu"), Mapping) else {}
    count, name = gpu.get("count"), gpu.get("name")
    if count and name:
        parts.append(f"{count} x {name}")
    elif name or count:
        parts.append(str(name or f"{count} GPU" + ("s" if count > 1 else "")))
    parallel = context.get("parallel") if isinstance(context.get("parallel"), Mapping) else {}
    parts.append(" ".join(f"{k}={parallel[k]}" for k in ("tp", "dp", "pp", "ep") if parallel.get(k)))
    if phase and phase != "unknown":
        parts.append(f"phase {phase}")
    return " · ".join(part for part in parts if part) or None


def root_cause_lines(analysis: Any) -> list[str]:
    """The root cause block: exception and message, where it came from, the context."""
    root = _get(analysis, "root_cause")
    lines = ["Root cause"]
    if not isinstance(root, Mapping) or not (root.get("exception") or root.get("message")):
        if _get(analysis, "verdict") == "not_captured":
            lines.append("  not captured in this log: it ends before the error that stopped the launch")
        else:
            lines.append("  no error found in this log")
        context = _context_line(_get(analysis, "context"), _get(analysis, "phase"))
        if context:
            lines.append(_cut(f"  seen on  {context}", WIDTH))
        return lines
    lines.extend(_error_lines(root.get("exception"), root.get("message")))
    where = [f"process {root['process']}" if root.get("process") else "the main process"]
    if root.get("line_number"):
        where.append(f"line {root['line_number']}")
    ranks = root.get("ranks") or []
    if len(ranks) > 1:
        where.append(f"repeated by {len(ranks)} processes")
    if root.get("truncated"):
        where.append("the log ends inside its traceback")
    lines.append(_cut(f"  from     {', '.join(where)}", WIDTH))
    context = _context_line(_get(analysis, "context"), _get(analysis, "phase"))
    if context:
        lines.append(_cut(f"  seen on  {context}", WIDTH))
    return lines


def change_lines(change: Any, indent: str) -> list[str]:
    """A fix's exact change: the flags, env vars, version pin, diff or target engine."""
    if not isinstance(change, Mapping):
        return []
    out: list[str] = []
    for key, value in change.items():
        if value in (None, "", [], {}):
            continue
        label = f"{indent}{key + ':':<9}"
        if key == "diff":
            out.append(f"{indent}diff:")
            out.extend(_code(str(value).splitlines(), indent + "  ", DIFF_LINES))
        elif key == "env" and isinstance(value, Mapping):
            out.extend(_code((f"{name}={val}" for name, val in value.items()), label, 20))
        elif key == "engine" and change.get("engine_version"):
            out.append(f"{label}{value} {change['engine_version']}")
        elif key == "engine_version" and change.get("engine"):
            continue
        elif isinstance(value, list):
            out.extend(_code((str(item) for item in value), label, 20))
        else:
            out.extend(_code([str(value)], label, 1))
    return out


def _applies_text(applies: Any) -> str | None:
    if not isinstance(applies, Mapping):
        return None
    parts = []
    for key, label in (("engine", ""), ("engine_versions", "versions "), ("model_archs", ""),
                       ("gpu_families", "")):
        value = applies.get(key)
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        if value:
            parts.append(f"{label}{value}")
    return " · ".join(parts) or None


def _evidence_text(fix: Mapping[str, Any]) -> str:
    """Whose word a fix has: the upstream threads a seed cites, apart from this team's
    own outcomes (an older service gives only the totals)."""
    if "team_worked" not in fix:
        return f"worked {fix.get('worked', 0)}, failed {fix.get('failed', 0)}"
    parts = []
    if fix.get("upstream_worked") or fix.get("upstream_failed"):
        parts.append(f"reported upstream: worked {fix.get('upstream_worked', 0)}, "
                     f"failed {fix.get('upstream_failed', 0)}")
    if fix.get("team_worked") or fix.get("team_failed"):
        parts.append(f"this team: worked {fix.get('team_worked', 0)}, failed {fix.get('team_failed', 0)}")
    if fix.get("worked_here") or fix.get("failed_here"):
        parts.append(f"on this setup {fix.get('worked_here', 0)}/{fix.get('failed_here', 0)}")
    return "; ".join(parts) or "no outcome recorded yet"


def fix_lines(fixes: Any, recommended: Any = None) -> list[str]:
    fixes = [fix for fix in fixes or [] if isinstance(fix, Mapping)]
    if not fixes:
        return ["Fixes", "  none recorded yet for this incident (add one on its page)"]
    lines = ["Fixes"]
    for number, fix in enumerate(fixes, start=1):
        star = "  (recommended)" if recommended is not None and fix.get("id") == recommended else ""
        lines.append(_cut(f"  {number}. {fix.get('title') or 'untitled fix'}", WIDTH - len(star)) + star)
        lines.append(_cut(f"     {fix.get('kind') or 'fix'} · {_evidence_text(fix)}", WIDTH))
        lines.extend(_wrap(fix.get("description"), "     "))
        lines.extend(change_lines(fix.get("change"), "     "))
        applies = _applies_text(fix.get("applies_to"))
        if applies:
            lines.append(_cut(f"     applies to: {applies}", WIDTH))
    return lines


def recommendation_lines(recommendation: Any) -> list[str]:
    path = _get(recommendation, "path")
    if not path:
        return []
    label = PATH_LABELS.get(str(path), str(path))
    target = _get(recommendation, "engine")
    if target:
        label += f" to {target}" + (f" {_get(recommendation, 'engine_version')}"
                                    if _get(recommendation, "engine_version") else "")
    lines = [f"Recommendation: {label}"]
    lines.extend(_wrap(_get(recommendation, "reason"), "  "))
    return lines


def _similar_lines(similar: Any, base_url: str | None) -> list[str]:
    rows = [s for s in similar or [] if isinstance(s, Mapping)][:SIMILAR_SHOWN]
    if not rows:
        return []
    lines = ["Similar incidents"]
    for row in rows:
        score = row.get("score")
        score_text = f"{score:5.1f}" if isinstance(score, int | float) else "    ?"
        ident = f"#{row['incident_id']}  " if row.get("incident_id") is not None else ""
        lines.append(_cut(f"  {ident}{score_text}  {row.get('title') or ''}", WIDTH))
    return lines


def _headline(answer: Mapping[str, Any], base_url: str | None,
              heading: str = "Crash KB") -> list[str]:
    status = _get(answer, "match", "status")
    score = _get(answer, "match", "score")
    incident = answer.get("incident") if isinstance(answer.get("incident"), Mapping) else None
    stored = answer.get("occurrence") is not None
    closest = _get(answer, "match", "incident_id")
    ident = f" #{incident['id']}" if incident and incident.get("id") is not None else ""
    if status == "similar" and stored and incident and closest != incident.get("id"):
        # stored as a new incident, beside the closest one it resembles
        head = f"new incident{ident}, similar to #{closest}"
    elif status == "new":
        head = f"new incident{ident}" if stored else "no matching incident (nothing stored)"
    else:  # offline answers carry no id: the local KB's means nothing elsewhere
        head = STATUS_WORDS.get(str(status), f"match: {status}" if status else "answer received") + ident
    if isinstance(score, int | float) and status in ("known", "similar"):
        head += f", score {score:.1f}"
    if status in ("known", "similar") and not [f for f in answer.get("fixes") or [] if f]:
        head += ", no fix recorded yet"
    if answer.get("replayed"):
        head += " (a retry of an upload already stored; nothing stored again)"
    lines = [_cut(f"{heading}: {head}", WIDTH)]
    if incident:
        lines.extend(_wrap(incident.get("title"), "  ", max_lines=3))
        url = absolute_url(incident.get("url"), base_url)
        if url:
            lines.append(f"  {url}")
        elif incident.get("slug"):
            lines.append(f"  seed {incident['slug']}")
    return lines


def upload_report(answer: Mapping[str, Any], *, base_url: str | None = None,
                  heading: str = "Crash KB", root_cause: bool = True) -> str:
    """The answer to an upload (`POST /incidents`) or an analysis (`POST /analyze`);
    `root_cause=False` when the root cause was printed already (`kb analyze`)."""
    blocks = [_headline(answer, base_url, heading)]
    if root_cause:
        blocks.append(root_cause_lines(answer.get("analysis")))
    recommended = _get(answer, "recommendation", "fix_id")
    blocks.append(recommendation_lines(answer.get("recommendation")))
    if answer.get("incident") or answer.get("fixes"):
        blocks.append(fix_lines(answer.get("fixes"), recommended))
    blocks.append(_similar_lines(answer.get("similar"), base_url))
    return _join(blocks)


def upload_summary(answer: Mapping[str, Any], *, base_url: str | None = None) -> str:
    """One line per delivered log (`kb flush` prints it before each full report)."""
    parts = [_headline(answer, base_url)[0].removeprefix("Crash KB: ")]
    root = _get(answer, "analysis", "root_cause")
    if isinstance(root, Mapping) and root.get("exception"):
        parts.append(f"{root['exception']}: {root.get('message') or ''}")
    return _cut(" | ".join(parts), WIDTH)


def _seen_text(detail: Mapping[str, Any]) -> str:
    count = detail.get("occurrence_count") or 0
    if not count:
        return "not seen here yet (curated knowledge)" if detail.get("seeded") else "no upload stored"
    first, last = str(detail.get("first_seen") or "")[:16], str(detail.get("last_seen") or "")[:16]
    return f"seen {count} time(s), first {first.replace('T', ' ')}, last {last.replace('T', ' ')}"


def incident_report(detail: Mapping[str, Any], *, base_url: str | None = None) -> str:
    """One incident (`GET /incidents/N`, `kb show N`)."""
    head = [_cut(f"Crash KB incident #{detail.get('id')}", WIDTH)]
    head.extend(_wrap(detail.get("title"), "  ", max_lines=3))
    url = absolute_url(detail.get("url"), base_url)
    if url:
        head.append(f"  {url}")
    facts = [str(detail["engine"]) if detail.get("engine") else "",
             f"affected {detail['affected_versions']}" if detail.get("affected_versions") else "",
             f"fixed in {detail['fixed_in']}" if detail.get("fixed_in") else "",
             f"phase {detail['phase']}" if detail.get("phase") else "",
             "engine limitation" if detail.get("engine_limitation") else ""]
    head.append(_cut("  " + " · ".join(f for f in facts if f) if any(facts) else "", WIDTH))
    head.append(f"  {_seen_text(detail)}")
    if detail.get("tags"):
        head.append(_cut("  tags: " + ", ".join(str(t) for t in detail["tags"]), WIDTH))
    if detail.get("signature"):
        head.append(_cut(f"  signature: {detail['signature']}", WIDTH))
    merged = detail.get("merged_into")
    if isinstance(merged, Mapping):
        head.append(_cut(f"  merged into #{merged.get('id')} {merged.get('title') or ''}", WIDTH))
    blocks = [[line for line in head if line.strip()]]
    if detail.get("summary"):
        blocks.append(["Summary", *_wrap(detail["summary"], "  ")])
    if detail.get("analysis"):
        blocks.append(root_cause_lines(detail["analysis"]))
    blocks.append(recommendation_lines(detail.get("recommendation")))
    blocks.append(fix_lines(detail.get("fixes"), _get(detail, "recommendation", "fix_id")))
    follows = detail.get("next")
    if isinstance(follows, Mapping):
        blocks.append(["Often next, once fixed",
                       _cut(f"  #{follows.get('id')} {follows.get('title') or ''}", WIDTH)])
    blocks.append(_occurrence_lines(detail.get("occurrences"), detail.get("occurrence_count")))
    links = [str(link) for link in detail.get("links") or []]
    if links:
        blocks.append(["Links", *(f"  {link}" for link in links)])
    blocks.append(_similar_lines(detail.get("similar"), base_url))
    return _join(blocks)


def _occurrence_lines(occurrences: Any, total: Any) -> list[str]:
    rows = [o for o in occurrences or [] if isinstance(o, Mapping)]
    if not rows:
        return []
    lines = [f"Occurrences (newest {min(len(rows), OCCURRENCES_SHOWN)} of {total or len(rows)})"]
    for row in rows[:OCCURRENCES_SHOWN]:
        when = str(row.get("created_at") or "")[:16].replace("T", " ")
        gpu = (f"{row['gpu_count']} x {row['gpu_name']}" if row.get("gpu_count") and row.get("gpu_name")
               else row.get("gpu_name") or "")
        where = " · ".join(str(x) for x in (
            " ".join(str(v) for v in (row.get("engine"), row.get("engine_version")) if v),
            row.get("model") or "", gpu, row.get("host") or "") if x)
        lines.append(_cut(f"  #{row.get('id')}  {when}  {row.get('match_status') or ''}  {where}", WIDTH))
    return lines


def list_report(listing: Mapping[str, Any], *, base_url: str | None = None) -> str:
    """A page of incidents (`GET /incidents`, `kb search`)."""
    items = [item for item in listing.get("items") or [] if isinstance(item, Mapping)]
    total = listing.get("total") or 0
    page, per_page = listing.get("page") or 1, listing.get("per_page") or len(items) or 1
    pages = max(1, -(-int(total) // int(per_page)))
    lines = [f"Crash KB: {total} incident(s)" + (f", page {page} of {pages}" if pages > 1 else "")]
    if not items:
        lines.append("  nothing matches")
    for item in items:
        seen = f"{item.get('occurrences') or 0}x"
        fixes = f"{item.get('fixes') or 0} fix" + ("es" if (item.get("fixes") or 0) != 1 else "")
        prefix = f"  #{item.get('id'):<5} {str(item.get('engine') or '-'):<12} {seen:>5} {fixes:<8} "
        lines.append(_cut(prefix + str(item.get("title") or ""), WIDTH))
        match = item.get("log_match")
        if isinstance(match, Mapping) and match.get("line"):  # where its log matched `q`
            lines.append(_cut(f"         log #{match.get('occurrence_id')}: {match['line']}", WIDTH))
    if pages > page:
        lines.append(f"  … more on page {page + 1}")
    return _join([lines])


def error_report(status: int, detail: Any) -> str:
    return _join([[_cut(f"Crash KB: error {status}", WIDTH), *_wrap(detail, "  ")]])


def _join(blocks: list[list[str]]) -> str:
    return "\n\n".join("\n".join(block) for block in blocks if block) + "\n"
