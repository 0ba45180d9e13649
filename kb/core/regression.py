"""When a new occurrence of a resolved incident is a regression: pure, no I/O.

An incident is resolved either in an engine version ("fixed in 0.8.5") or without one
("resolved": we believe it is gone, whatever the version). The rule, decided here:

- resolved without a version: every later occurrence is a regression;
- resolved in X: an occurrence on version >= X (PEP 440, `v` prefix and local suffixes
  ignored, pre-releases of X count as before X) is a regression; one on an older version
  is the known bug on an installation not yet upgraded, not a regression;
- resolved in X, occurrence with no version or one that does not parse: a regression.
  Nothing shows it is an old installation, and a false alarm a person can close is
  cheaper than a silent recurrence.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from kb.core import lazyre

_VERSION = lazyre.compile(r"\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*")


def parse_version(text: str | None) -> Version | None:
    """`0.8.5`, `v0.8.5`, `0.6.3.post1`, `0.10.1+cu124` as a PEP 440 version; None when
    there is none."""
    if not text:
        return None
    match = _VERSION.match(text.strip().lstrip("vV"))
    if not match:
        return None
    try:
        return Version(match.group(0))
    except InvalidVersion:
        return None


def is_regression(resolved_in: str | None, occurrence_version: str | None) -> bool:
    """Whether an occurrence on `occurrence_version` reopens an incident resolved in
    `resolved_in` (None: resolved without a version). See the module's rule."""
    fixed = parse_version(resolved_in)
    if fixed is None:
        return True
    seen = parse_version(occurrence_version)
    if seen is None:
        return True
    return seen >= fixed


__all__ = ["is_regression", "parse_version"]
