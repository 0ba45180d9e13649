"""A repeat of a known crash stored in one Postgres statement, in autocommit.

Most uploads are crashes the knowledge base has seen (every rank and every retry prints
the same error). Through the ORM such an upload costs BEGIN, the lookup, the occurrence
insert, the counter update, the facet insert and COMMIT: up to six round trips and
~2.9 ms of client CPU (SQLAlchemy and psycopg) on the 2-core benchmark machine.
Postgres runs data-modifying CTEs, so the lookup, the insert, the counter update and
the facets are one statement, atomic on its own: one round trip, ~1.5 ms. SQLite has no
such CTEs; it (and every upload this does not cover: a new crash, a fuzzy match, an
incident merged away) takes the general path in kb.services.ingest, which stores the
same rows (tests/service/test_known_upload.py compares them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from psycopg.types.json import Jsonb
from sqlalchemy import ARRAY, Engine, String, bindparam, cast, func, select, true
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from kb.db import logsearch
from kb.db.models import Incident, IncidentFacet, Occurrence
from kb.db.repositories import HEAD_COLUMNS, IncidentHead, counting, head_from_row, routed

_json = msgspec.json.encode  # the analysis is plain builtins already (msgspec.to_builtins)

# Columns an upload sets on its occurrence (the id is the database's).
OCCURRENCE_COLUMNS = tuple(c.name for c in Occurrence.__table__.columns if c.name != "id")


def _statement():
    # A resolved incident takes the general path: an upload may make it a regression
    # (kb.services.regressions), decided in Python (PEP 440), in that transaction.
    head = routed(*HEAD_COLUMNS).where(Incident.merged_into_id.is_(None),
                                       Incident.status != "resolved").cte("head")
    table = Occurrence.__table__
    # Each value is cast to its column's type: Postgres cannot infer the type of a
    # parameter in a SELECT list (a NULL would arrive as text).
    values = [cast(bindparam(f"o_{name}", type_=table.c[name].type), table.c[name].type)
              for name in OCCURRENCE_COLUMNS if name != "incident_id"]
    occurrence = (postgresql.insert(Occurrence)
                  .from_select(list(OCCURRENCE_COLUMNS), select(head.c.id, *values))
                  .returning(Occurrence.id).cte("occurrence"))
    counted = counting(Incident.id == head.c.id).cte("counted")
    pairs = func.unnest(cast(bindparam("facet_kinds"), ARRAY(String)),
                        cast(bindparam("facet_values"), ARRAY(String))
                        ).table_valued("kind", "value").render_derived("pairs")
    facets = (postgresql.insert(IncidentFacet)
              .from_select(["incident_id", "kind", "value"],
                           select(head.c.id, pairs.c.kind, pairs.c.value)
                           .select_from(head.join(pairs, true())))
              .on_conflict_do_nothing().cte("facets"))
    # The head's columns in IncidentHead's order, with the counters as updated.
    columns = [counted.c[c.name] if c.name in counted.c else c for c in head.c]
    return (select(occurrence.c.id, *columns)
            .select_from(head.join(occurrence, true()).join(counted, true())).add_cte(facets))


def _driver_sql() -> tuple[str, dict[str, Any]]:
    """The statement as the driver's SQL, compiled once, and its constant parameters.
    It runs through exec_driver_sql: SQLAlchemy's per-execution work (cache lookup,
    parameter processing for ~35 values, result typing) costs ~0.7 ms here, more than
    the statement's own client side; errors are still wrapped and handled as usual."""
    statement = _statement()
    dialect = psycopg_dialect.dialect()
    params = statement.compile(dialect=dialect).params
    constants = {k: v for k, v in params.items() if v is not None}
    placeholders = statement.params({k: None for k in params if k not in constants})
    sql = str(placeholders.compile(dialect=dialect, compile_kwargs={"render_postcompile": True}))
    # psycopg converts a statement's placeholders once and caches that only for statements
    # up to MAX_CACHED_STATEMENT_LENGTH: hence the short names (`o_` for the occurrence's
    # values) and one space for every run of whitespace. (SQLAlchemy renders no literal
    # here: every value is a parameter, so no string's spacing changes.)
    sql = " ".join(sql.split())
    # The log travels in binary: no hex encoding of ~60 KB on either side.
    sql = sql.replace("%(o_log_compressed)s", "%(o_log_compressed)b")
    assert "%(o_log_compressed)b" in sql, "the log's placeholder changed form"
    return sql, {k: v for k, v in constants.items() if f"%({k})" in sql}


_SQL, _CONSTANTS = _driver_sql()


def store_known_occurrence(engine: Engine, route_key: str, occurrence: dict[str, Any],
                           facets: set[tuple[str, str]], seen_at: datetime
                           ) -> tuple[IncidentHead, int] | None:
    """Store `occurrence` on the live incident `route_key` routes to, count it and add
    `facets`, all or nothing: (the incident as updated, the occurrence id), or None when
    no live incident has this route (nothing is written then). `engine` must be a
    Postgres engine in autocommit: the statement is its own transaction."""
    occurrence = logsearch.with_search_vector("postgresql", occurrence)
    params: dict[str, Any] = {f"o_{name}": value for name, value in occurrence.items()
                              if name != "incident_id"}
    params["o_analysis"] = Jsonb(params["o_analysis"], dumps=_json)
    ordered = sorted(facets)
    params.update(_CONSTANTS, route_key=route_key, seen_at=seen_at,
                  facet_kinds=[k for k, _ in ordered], facet_values=[v for _, v in ordered])
    with engine.connect() as connection:
        row = connection.exec_driver_sql(_SQL, params).first()
    if row is None:
        return None
    return head_from_row(row[1:]), row[0]
