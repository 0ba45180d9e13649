"""Queries, and nothing else: no matching policy, no HTTP. Services call these inside
one transaction (kb.db.session.Database.read/write) and decide what to do with the rows.
Candidate loading for fuzzy matching lives here because it must use indexed columns;
the scoring of the candidates lives in kb.core.match.

One module a concept (heads, fingerprints, incidents, facets, occurrences, fixes, merges,
the list); Repository is the union of their query mixins over one session."""

from __future__ import annotations

from kb.db.repositories.facets import FacetQueries, facet_values
from kb.db.repositories.fingerprints import Candidate, FingerprintQueries
from kb.db.repositories.fixes import FixQueries
from kb.db.repositories.heads import (
    HEAD_COLUMNS,
    HeadQueries,
    IncidentHead,
    counting,
    head_from_row,
    routed,
)
from kb.db.repositories.incidents import IncidentQueries
from kb.db.repositories.listing import VIEWS, ListQueries
from kb.db.repositories.merges import MergeQueries
from kb.db.repositories.occurrences import OccurrenceQueries

__all__ = ["HEAD_COLUMNS", "VIEWS", "Candidate", "IncidentHead", "Repository", "counting",
           "facet_values", "head_from_row", "routed"]


class Repository(HeadQueries, IncidentQueries, FingerprintQueries, MergeQueries, FacetQueries,
                 OccurrenceQueries, FixQueries, ListQueries):
    """Every query, over one session (kb.db.repositories.base.RepositoryBase)."""
