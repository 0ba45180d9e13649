"""What a stored crash is found by before it is scored: keys computed from a crash's
features, so the repository runs indexed lookups and holds no matching policy, and the
terms whose rarity in the knowledge base weighs the message similarity (kb.core.match)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from kb.core import lazyre
from kb.core.comparable import carried_error, comparable
from kb.core.records import CrashFeatures

_WORD = lazyre.compile(r"[a-z][a-z_]{2,}")
_KEY_STOP = frozenset({"the", "and", "not"})
# A term: a word, identifier or dotted/slashed name of the template; placeholders
# ("<n>", "<path>") are what normalization made equal, so they identify nothing.
_TERM = lazyre.compile(r"(?<![<\w])[A-Za-z_][\w.-]*[A-Za-z0-9_]")
_STOP_TERMS = frozenset("""a an the of to in on at by for from with and or is are was were be been
has have had it its this that not no as if when while into than then so""".split())


# A short label before the statement ("CUDA initialization: ", "CUDA error: ") and a log
# tag ("[TensorRT-LLM][ERROR] "): one error is printed with and without them, by torch's
# warning and its exception, by a C++ logger and the Python exception it becomes.
_TAGS = lazyre.compile(r"^(?:\[[\w .-]{1,30}\])+ ?")
_LABEL = lazyre.compile(r"^[A-Za-z][\w .-]{2,40}?: (?=\S.{19})")


def message_key(template: str) -> str:
    """The first three words of a message template's identifying part (kb.core.comparable,
    without a leading label), lowercased: an indexed narrowing key that survives changed
    numbers and paths, a rank's locator tag, a wrapper's "terminated with exception:" and
    a wrapper that quotes the typed error it caught.
    Sample: "No available memory for the cache blocks. Try <n>" -> "available memory for".
    Stored keys are computed once: a change here needs a migration that recomputes them
    (as 0011 does)."""
    carried = carried_error(template)
    view = _TAGS.sub("", comparable(carried[1] if carried else template), count=1)
    view = _LABEL.sub("", view, count=1)
    words = [w for w in _WORD.findall(view.lower()) if w not in _KEY_STOP]
    return " ".join(words[:3])[:120]


# Where a message's own statement may start after a clause of context: a logger's or
# wrapper's "Failed to load step 'x': Step load failed: <the error>".
_CLAUSE_END = lazyre.compile(r"(?<=[\w)'\"\]]): (?=\S)")
_CLAUSE_KEYS = 3


def clause_tails(template: str) -> list[str]:
    """The statements that follow each leading clause of context ("<what was being
    done>: <the error>"), outermost first, each long enough to name an error."""
    return [rest for found in list(_CLAUSE_END.finditer(template))[:8]
            if len(rest := template[found.end():]) >= 20]


def clause_keys(template: str) -> tuple[str, ...]:
    """The message keys of the statements that follow each leading clause of context,
    nearest the end last: a log line that quotes an error after saying what failed is
    found by that error's key too. Lookups only; a stored fingerprint keeps its one key."""
    keys: list[str] = []
    for rest in clause_tails(template):
        if (key := message_key(rest)) and len(key.split()) == 3 and key not in keys:
            keys.append(key)
    return tuple(keys[-_CLAUSE_KEYS:])


@dataclass(frozen=True, slots=True)
class RecallKeys:
    """The indexed lookups that bring a crash's candidates: same exception and message
    key, same exception, and, since another exception type may carry the same cause (a
    wrapper, another engine's type), same message key (its own or that of the error a
    clause of context leads up to) and same engine and phase."""

    exception: str
    message_key: str
    engine: str | None
    phase: str | None
    clause_keys: tuple[str, ...] = ()

    @property
    def message_keys(self) -> list[str]:
        return list(dict.fromkeys([self.message_key, *self.clause_keys]))


def recall_keys(features: CrashFeatures) -> RecallKeys:
    phase = features.phase if features.phase not in (None, "unknown") else None
    return RecallKeys(features.exception[:300], message_key(features.message_template),
                      features.engine, phase, clause_keys(features.message_template))


@lru_cache(maxsize=8192)
def terms(template: str) -> frozenset[str]:
    """The terms of a message template, lowercased, without stop words and placeholders:
    'Model architectures [<list>] failed to be inspected' -> {model, architectures,
    failed, inspected}."""
    return frozenset(t for t in (m.lower() for m in _TERM.findall(template)) if t not in _STOP_TERMS)


@dataclass(frozen=True, slots=True)
class TermWeights:
    """How rare each term is among the stored templates: its inverse document frequency
    (1 + ln((1 + N) / (1 + df)), N stored templates, df of them holding the term). A term
    in every template ("CUDA", "error") weighs 1, one seen once weighs most, so shared
    boilerplate does not decide a match and a rare identifying token does. With nothing
    stored every term weighs the same."""

    documents: int = 0
    frequency: Mapping[str, int] = field(default_factory=dict)

    def weight(self, term: str) -> float:
        if self.documents <= 0:
            return 1.0
        df = min(self.frequency.get(term, 0), self.documents)
        return 1.0 + math.log((1 + self.documents) / (1 + df))

    @classmethod
    def over(cls, templates: Iterable[str]) -> TermWeights:
        """The weights of a collection of templates (what the database table counts)."""
        frequency: dict[str, int] = {}
        documents = 0
        for template in templates:
            documents += 1
            for term in terms(template):
                frequency[term] = frequency.get(term, 0) + 1
        return cls(documents, frequency)


UNIFORM = TermWeights()
