"""Links in answers, in one place: the URL shapes of an incident and of a stored log, the
address they hang on, and the answer records, which are the service's structs with their
links.

Services name incidents and occurrences by id and know no address (kb.services.views).
A route hands its struct to `linked`, which returns its answer record: the same keys in
the same order, with `url` and `log_url` where the API has always had them, absolute on
the address the client reached (KB_PUBLIC_URL, else the request's own base URL).

An answer record declares only what it adds to its struct: its link, and the fields
that hold linked structs. Everything else (fields, order, defaults, name) is the
struct's, so a key added to a struct is in the answer and the OpenAPI document at once.
The public client decodes answers into these records too (kb.Client, kb.IncidentDetail):
this module loads nothing of the web stack."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kb.services import views

if TYPE_CHECKING:
    from litestar import Request

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Links:
    """Absolute URLs on one address (`base`, without a trailing slash). The Notifier
    links an upload's events with the same (kb.services.notifications.EventLinks)."""

    base: str

    def incident(self, incident_id: int) -> str:
        return f"{self.base}/incidents/{incident_id}"

    def occurrence_log(self, occurrence_id: int) -> str:
        return f"{self.base}/occurrences/{occurrence_id}/log"


def base_url(request: Request) -> str:
    """The address the client reached: KB_PUBLIC_URL (a proxy's), else the request's."""
    public = request.app.state.settings.public_url
    return (public or str(request.base_url)).rstrip("/")


def links_for(request: Request) -> Links:
    return Links(base_url(request))


# ---- answer records ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Link:
    """A URL a record adds to its struct: its key, the key it follows, how it is made."""

    key: str
    after: str
    make: Callable[[Links, Any], str]


_INCIDENT_URL = _Link("url", "id", lambda links, it: links.incident(it.id))


@dataclass(slots=True)
class _Record:
    cls: type
    link: _Link | None
    names: list[str]  # the struct's fields
    nested: list[str]  # those holding linked structs


_RECORDS: dict[type, _Record] = {}  # service struct -> its answer record


def _answer_record(link: _Link | None = None) -> Callable[[type[T]], type[T]]:
    """Make the answer record a class declares: a subclass of the struct it answers for
    type checkers, made a dataclass of its own (the struct's fields in their order, the
    link after the field it follows, the declared fields' types) so its keys keep the
    struct's order."""

    def make(declared: type[T]) -> type[T]:
        struct = declared.__mro__[1]
        hints = typing.get_type_hints(declared, include_extras=True)
        own = declared.__dict__.get("__annotations__", {})  # its declared fields, in order
        spec: list[tuple[Any, ...]] = []
        for f in fields(struct):
            if f.name not in own and _holds_linked(hints[f.name]):
                raise TypeError(f"{declared.__name__}.{f.name} holds a linked struct: declare it")
            if f.default is not MISSING:
                spec.append((f.name, hints[f.name], field(default=f.default)))
            elif f.default_factory is not MISSING:
                spec.append((f.name, hints[f.name], field(default_factory=f.default_factory)))
            else:
                spec.append((f.name, hints[f.name]))
            if link is not None and f.name == link.after:
                spec.append((link.key, hints[link.key]))
        cls = make_dataclass(struct.__name__, spec, slots=True)
        cls.__module__, cls.__qualname__ = __name__, struct.__qualname__  # OpenAPI's name
        cls.__doc__ = declared.__doc__ or struct.__doc__
        nested = [name for name in own if link is None or name != link.key]
        _RECORDS[struct] = _Record(cls, link, [f.name for f in fields(struct)], nested)
        return cls  # type: ignore[return-value]

    return make


def _holds_linked(hint: Any) -> bool:
    return (isinstance(hint, type) and hint in _RECORDS) or any(map(_holds_linked, typing.get_args(hint)))


@_answer_record(_Link("log_url", "line", lambda links, it: links.occurrence_log(it.occurrence_id)))
class LogMatchView(views.LogMatchView):
    log_url: str


@_answer_record(_INCIDENT_URL)
class IncidentRef(views.IncidentRef):
    url: str


@_answer_record()
class UploadResult(views.UploadResult):
    incident: IncidentRef | None


@_answer_record(_INCIDENT_URL)
class IncidentSummary(views.IncidentSummary):
    url: str
    log_match: LogMatchView | None


@_answer_record()
class IncidentList(views.IncidentList):
    items: list[IncidentSummary]


@_answer_record(_INCIDENT_URL)
class LinkedIncident(views.LinkedIncident):
    url: str


@_answer_record(_Link("log_url", "log_lines", lambda links, it: links.occurrence_log(it.id)))
class OccurrenceView(views.OccurrenceView):
    log_url: str


@_answer_record(_INCIDENT_URL)
class IncidentDetail(views.IncidentDetail):
    url: str
    merged_into: LinkedIncident | None
    next: LinkedIncident | None
    chain: list[LinkedIncident]
    previous: list[LinkedIncident]
    occurrences: list[OccurrenceView]


@_answer_record(_INCIDENT_URL)
class DashboardIncident(views.DashboardIncident):
    url: str


@_answer_record(_INCIDENT_URL)
class BucketIncident(views.BucketIncident):
    url: str


@_answer_record()
class Bucket(views.Bucket):
    incidents: list[BucketIncident]


@_answer_record()
class Dashboard(views.Dashboard):
    top: list[DashboardIncident]
    growing: list[DashboardIncident]
    new_incidents: list[DashboardIncident]
    recurring_incidents: list[DashboardIncident]
    by_engine_version: list[Bucket]
    by_gpu_family: list[Bucket]
    by_model_arch: list[Bucket]
    regressions: list[DashboardIncident]


def _linked(value: Any, links: Links) -> Any:
    if isinstance(value, list):
        return [_linked(v, links) for v in value]
    record = _RECORDS.get(type(value))
    if record is None:
        return value
    values = {name: getattr(value, name) for name in record.names}
    for name in record.nested:
        values[name] = _linked(values[name], links)
    if record.link is not None:
        values[record.link.key] = record.link.make(links, value)
    return record.cls(**values)


def linked(request: Request, struct: Any) -> Any:
    """`struct` (a service's answer) as its answer record, linked on the address
    `request` reached; a struct without links as it is."""
    return _linked(struct, links_for(request))


__all__ = ["Bucket", "BucketIncident", "Dashboard", "DashboardIncident", "IncidentDetail",
           "IncidentList", "IncidentRef", "IncidentSummary", "LinkedIncident", "Links",
           "LogMatchView", "OccurrenceView", "UploadResult", "base_url", "linked", "links_for"]
