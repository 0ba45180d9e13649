"""Fixes of incidents and the outcomes reported for them."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, exists, func, select

from kb.db.models import Fix, FixOutcome
from kb.db.repositories.base import RepositoryBase


_FIXES_OF = (select(Fix).where(Fix.incident_id.in_(bindparam("incident_ids", expanding=True)))
             .order_by(Fix.id))


_OUTCOME_COUNTS = (
    select(FixOutcome.fix_id, FixOutcome.worked, FixOutcome.engine_version,
           FixOutcome.model_arch, func.count())
    .where(FixOutcome.fix_id.in_(bindparam("fix_ids", expanding=True)))
    .group_by(FixOutcome.fix_id, FixOutcome.worked, FixOutcome.engine_version,
              FixOutcome.model_arch))


class FixQueries(RepositoryBase):
    def fix(self, fix_id: int) -> Fix | None:
        return self.s.get(Fix, fix_id)

    def fixes_of(self, incident_ids: Iterable[int]) -> list[Fix]:
        ids = list(set(incident_ids))
        if not ids:
            return []
        return list(self.s.execute(_FIXES_OF, {"incident_ids": ids}).scalars())

    def fix_by_seed_key(self, key: str) -> Fix | None:
        return self.s.execute(select(Fix).where(Fix.seed_key == key)).scalar_one_or_none()

    def outcome_counts(self, fix_ids: Iterable[int]) -> list[tuple[int, bool, str | None, str | None, int]]:
        """(fix_id, worked, engine_version, model_arch, count) groups."""
        ids = list(set(fix_ids))
        if not ids:
            return []
        rows = self.s.connection().execute(_OUTCOME_COUNTS, {"fix_ids": ids})
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def has_outcomes(self, fix_id: int) -> bool:
        return bool(self.s.execute(select(exists().where(FixOutcome.fix_id == fix_id))).scalar())
