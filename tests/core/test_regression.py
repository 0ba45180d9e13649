"""The regression rule (kb.core.regression): which occurrence of a resolved incident
reopens it."""

from __future__ import annotations

import pytest

from kb.core.regression import is_regression, parse_version


@pytest.mark.parametrize("resolved_in, seen, regression", [
    ("0.8.5", "0.8.4", False),  # an installation not yet upgraded: the known bug
    ("0.8.5", "0.8.5rc1", False),  # a pre-release of the fix version comes before it
    ("0.8.5", "0.8.5", True),
    ("0.8.5", "v0.8.5", True),
    ("0.8.5", "0.10.1", True),  # PEP 440, not string order ("0.10" < "0.8" as text)
    ("0.8.5", "0.10.1+cu124", True),
    ("0.6.3", "0.6.3.post1", True),
    ("0.8.5", None, True),  # no version: nothing shows it is old, so it counts
    ("0.8.5", "nightly", True),
    (None, "0.1.0", True),  # resolved without a version: every occurrence counts
    (None, None, True),
])
def test_which_occurrences_are_regressions(resolved_in, seen, regression):
    assert is_regression(resolved_in, seen) is regression


def test_versions_as_logs_print_them():
    assert str(parse_version("v0.11.0")) == "0.11.0"
    assert str(parse_version("0.10.1.dev12+g1234abc")) == "0.10.1.dev12"
    assert parse_version("") is None and parse_version("main") is None
