"""Every entry of the pattern tables matches its own sample line: a table entry whose
sample stops matching is a rule that silently stopped working."""

import pytest

from kb.core import patterns as P
from kb.core.normalize import IRRELEVANT_FRAMES, MESSAGE_NORMALIZERS
from kb.core.redact import SECRET_RULES

RULE_TABLES = {
    "error_lines": P.ERROR_LINES, "known_messages": P.KNOWN_MESSAGES, "symptoms": P.SYMPTOMS,
    "cascades": P.CASCADES, "benign": P.BENIGN, "engine_messages": P.ENGINE_MESSAGES, "boilerplate": P.MESSAGE_BOILERPLATE, "phases": P.PHASE_MARKERS,
}


@pytest.mark.parametrize("rule", [r for table in RULE_TABLES.values() for r in table], ids=lambda r: r.name)
def test_rule_matches_its_sample(rule):
    assert rule.pattern.search(rule.sample), f"{rule.name} does not match its sample"
    assert rule.why


@pytest.mark.parametrize("prefix", P.PREFIXES, ids=lambda p: p.name)
def test_prefix_matches_its_sample(prefix):
    match = prefix.pattern.match(prefix.sample)
    assert match and match.end() > 0


@pytest.mark.parametrize("rule", MESSAGE_NORMALIZERS, ids=lambda r: r.name)
def test_normalizer_changes_its_sample(rule):
    assert rule.pattern.sub(rule.replacement, rule.sample) != rule.sample


@pytest.mark.parametrize("rule", IRRELEVANT_FRAMES, ids=lambda r: r.name)
def test_irrelevant_frame_rule_matches_its_sample(rule):
    assert rule.pattern.search(rule.sample)


@pytest.mark.parametrize("rule", SECRET_RULES, ids=lambda r: r.name)
def test_secret_rule_matches_its_sample(rule):
    assert rule.pattern.search(rule.sample)


@pytest.mark.parametrize("rule", [r for table in RULE_TABLES.values() for r in table if r.anchors], ids=lambda r: r.name)
def test_rule_anchors_are_in_its_sample(rule):
    """A rule is only tried on text holding one of its anchors: its sample must hold one."""
    assert any(anchor in rule.sample for anchor in rule.anchors)


def test_every_table_rule_anchor_reaches_the_prefilter():
    anchors = set(P.ERROR_ANCHORS)
    for table in (P.ERROR_LINES, P.KNOWN_MESSAGES):
        for rule in table:
            assert any(anchor in rule.sample for anchor in anchors), rule.name
