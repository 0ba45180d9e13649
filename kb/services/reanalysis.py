"""What a new ruleset (detection, normalization, identity) would change in a stored KB:
every stored log analyzed again, its identity compared with where it is stored. The
report says which occurrences would get another fingerprint, move to another incident,
which incidents would split and which would join; nothing is written."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import select

from kb.core.analyze import analyze
from kb.db.logcodec import decompress_log
from kb.db.models import Occurrence
from kb.db.repositories import Repository
from kb.db.session import Database
from kb.services.ingest import Overrides, with_overrides
from kb.services.matching import route_key
from kb.services.ruleset import ruleset

BATCH = 200


@dataclass(slots=True)
class Regrouping:
    occurrences: int = 0
    other_rulesets: int = 0  # stored by rules other than the installed ones (or before 0006)
    changed: int = 0  # its log now gives another fingerprint than the one stored
    unidentified: int = 0  # its log now shows no cause (or a weak one): it would stand alone
    moves: list[tuple[int, int, int]] = field(default_factory=list)  # occurrence, from, to
    splits: dict[int, int] = field(default_factory=dict)  # incident -> identities among its logs
    merges: list[tuple[int, ...]] = field(default_factory=list)  # incidents sharing one identity

    def lines(self, shown: int = 10) -> list[str]:
        out = [f"occurrences re-analyzed: {self.occurrences} "
               f"({self.other_rulesets} stored by other rules than {ruleset()})",
               f"  another fingerprint than stored: {self.changed}",
               f"  no identifying cause any more:   {self.unidentified}",
               f"  would move to another incident:  {len(self.moves)}"]
        out += [f"    occurrence #{o}: incident #{a} -> #{b}" for o, a, b in self.moves[:shown]]
        out.append(f"incidents that would split: {len(self.splits)}")
        out += [f"    #{i}: its logs now give {n} identities" for i, n in list(self.splits.items())[:shown]]
        out.append(f"incidents that would join: {len(self.merges)} group(s)")
        out += ["    " + " + ".join(f"#{i}" for i in group) for group in self.merges[:shown]]
        return out


def plan(db: Database) -> Regrouping:
    """Read every stored log in batches (one decompressed at a time) and compare."""
    report = Regrouping()
    identities: dict[int, set[str]] = defaultdict(set)  # incident -> route keys of its logs
    holders: dict[str, set[int]] = defaultdict(set)  # route key -> incidents holding it
    last = 0
    with db.read() as session:
        repo = Repository(session)
        while True:
            rows = session.execute(
                select(Occurrence.id, Occurrence.incident_id, Occurrence.fingerprint_hash,
                       Occurrence.engine, Occurrence.ruleset, Occurrence.log_compressed)
                .where(Occurrence.id > last).order_by(Occurrence.id).limit(BATCH)).all()
            if not rows:
                break
            for occurrence_id, incident_id, stored_hash, engine, stored_rules, blob in rows:
                last = occurrence_id
                report.occurrences += 1
                report.other_rulesets += stored_rules != ruleset()
                analysis, features = with_overrides(analyze(decompress_log(blob)), Overrides(engine=engine))
                fingerprint = analysis.fingerprint
                report.changed += fingerprint.hash != stored_hash
                if not analysis.identifies or fingerprint.weak:
                    report.unidentified += 1
                    continue
                key = route_key(fingerprint, features)
                identities[incident_id].add(key)
                holders[key].add(incident_id)
                owner = repo.head_by_route(key)
                if owner is not None and owner.id != incident_id:
                    report.moves.append((occurrence_id, incident_id, owner.id))
    report.splits = {i: len(keys) for i, keys in sorted(identities.items()) if len(keys) > 1}
    report.merges = sorted({tuple(sorted(ids)) for ids in holders.values() if len(ids) > 1})
    return report
