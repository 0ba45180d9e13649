"""Every entry of the pattern tables matches its own sample line: a table entry whose
sample stops matching is a rule that silently stopped working."""

import re

import pytest

from kb.core.capture import ATOMS

from kb.core import patterns as P
from kb.core.context import _ENGINE_LITERALS as CONTEXT_ENGINE_LITERALS
from kb.core.context import _ENGINE_MARKERS as CONTEXT_ENGINE_MARKERS
from kb.core.normalize import IRRELEVANT_FRAMES, MESSAGE_NORMALIZERS
from kb.core.redact import SECRET_RULES

RULE_TABLES = {
    "error_lines": P.ERROR_LINES, "known_messages": P.KNOWN_MESSAGES, "symptoms": P.SYMPTOMS,
    "cascades": P.CASCADES, "benign": P.BENIGN, "never_cause": P.NEVER_CAUSE, "engine_messages": P.ENGINE_MESSAGES, "boilerplate": P.MESSAGE_BOILERPLATE, "phases": P.PHASE_MARKERS,
}


@pytest.mark.parametrize("rule", [r for table in RULE_TABLES.values() for r in table], ids=lambda r: r.name)
def test_rule_matches_its_sample(rule):
    assert rule.pattern.search(rule.sample), f"{rule.name} does not match its sample"
    assert rule.why


@pytest.mark.parametrize("prefix", P.PREFIXES + ATOMS, ids=lambda p: p.name)
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
    assert any(_holds(rule, rule.sample, anchor) for anchor in rule.anchors)


def _holds(rule, text: str, anchor: str) -> bool:
    """`anchor` in `text`, in any case when the rule's pattern ignores case."""
    if rule.pattern.flags & re.IGNORECASE:
        return anchor.lower() in text.lower()
    return anchor in text


def _expansions(pattern: str) -> list[str]:
    """A text for every way through a pattern of literals, top-level alternatives and
    (?:a|b) groups of literals (what the phase markers are)."""
    group = re.search(r"\(\?:([^()]*)\)", pattern)
    if group:
        return [text for option in group.group(1).split("|")
                for text in _expansions(pattern[:group.start()] + option + pattern[group.end():])]
    return [alternative.replace("\\", "") for alternative in re.split(r"(?<!\\)\|", pattern)]


@pytest.mark.parametrize("rule", P.PHASE_MARKERS, ids=lambda r: r.name)
def test_phase_marker_anchors_cover_every_alternative(rule):
    """A line is searched for a phase marker only when it holds one of the marker's
    anchors (kb.core.context): every way the pattern can match must hold one."""
    texts = _expansions(rule.pattern.pattern)
    assert len(texts) > 1
    for text in texts:
        assert rule.pattern.search(text), f"{text!r} does not match {rule.pattern.pattern!r}"
        assert any(_holds(rule, text, anchor) for anchor in rule.anchors), (
            f"{rule.name}: no anchor in {text!r}; add one")


def test_every_table_rule_anchor_reaches_the_prefilter():
    anchors = set(P.ERROR_ANCHORS) | set(P.BLOCK_ANCHORS)
    for table in (P.ERROR_LINES, P.KNOWN_MESSAGES):
        for rule in table:
            assert any(anchor in rule.sample for anchor in anchors), rule.name


# Sentences that state a failure without naming an error, as real logs print them.
_STATEMENTS = [
    "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your GPU is not supported",
    "FP8 quantization is not supported on this device",
    "Sliding window attention are not supported for this backend",
    "failed to create engine from model file",
    "Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.",
    "ran out of memory while allocating the KV cache",
    "Connection to the scheduler timed out after 600 seconds",
    "The model's config does not allow remote code execution",
    "Writing to /models is not allowed",
    "The cache directory /root/.cache is not writable",
    "There was a problem when trying to write in your cache folder",
    "Synapse detected a device critical error that requires a restart. Killing process in 5 seconds",
    "nvidia-smi reported a Fatal error on the GPU",
    "Xid 48: an uncorrectable error was reported, an Unrecoverable error follows",
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1024.00 MiB on device 0: cudaMalloc failed",
    "allocation of size 268435456 failed.",
]


def test_every_failure_phrase_has_a_sentence_and_its_literals_reach_the_prefilter():
    """A statement line is read only when the pre-filter lets it through: every match
    of a failure phrase must hold one of its literals, and those are error anchors."""
    used = set()
    for sentence in _STATEMENTS:
        assert P.FAILURE_STATEMENT.search(sentence), sentence
        for pattern, literals in P.FAILURE_PHRASES:
            if re.search(pattern, sentence):
                used.add(pattern)
                assert any(literal in sentence for literal in literals), (sentence, literals)
    assert used == {pattern for pattern, _ in P.FAILURE_PHRASES}, "a phrase without a sentence here"
    assert {literal for _, literals in P.FAILURE_PHRASES for literal in literals} <= set(P.ERROR_ANCHORS)
    assert not P.FAILURE_STATEMENT.search("INFO 05-01 loading weights: the error rate is 0.1")


def _alternative_samples(pattern: str) -> list[str]:
    """A sample text for each top-level alternative of a marker pattern made of literals
    with a few escapes, anchors and digit runs (what the engine markers are)."""
    samples = []
    for alternative in pattern.split("|"):
        text = alternative.replace(r"\b", "").replace(r"\d+", "0").lstrip("^").rstrip("$")
        samples.append(text.replace("\\", ""))
    return samples


@pytest.mark.parametrize("engine", [name for name, _ in CONTEXT_ENGINE_MARKERS])
def test_engine_marker_literals_cover_every_alternative(engine):
    """The engine detector tests literals before its regex (kb.core.context): every
    alternative of the regex must contain one of the engine's literals, or lines that
    match the regex would never reach it."""
    pattern = dict(CONTEXT_ENGINE_MARKERS)[engine]
    for sample in _alternative_samples(pattern.pattern):
        assert pattern.search(sample), f"sample {sample!r} does not match {pattern.pattern!r}"
        assert any(literal in sample for literal in CONTEXT_ENGINE_LITERALS[engine]), (
            f"{engine}: no literal of _ENGINE_LITERALS in {sample!r}; add one")


def test_the_rule_index_picks_what_testing_every_anchor_picks():
    """kb.core.scan.first_rule finds anchors in one pass; it must pick the rule that
    trying each rule in order (its anchors by `in`, then its pattern) picks."""
    from kb.core import scan

    def naive(rules, text):
        return next((r for r in rules if (not r.anchors or any(a in text for a in r.anchors))
                     and r.pattern.search(text)), None)

    texts = [r.sample for table in RULE_TABLES.values() for r in table] + ["", "nothing to see"]
    for name, table in RULE_TABLES.items():
        for text in texts:
            assert scan.first_rule(table, text) is naive(table, text), (name, text)


def test_the_literal_set_finds_what_testing_every_literal_finds():
    """LiteralSet answers in one pass what `literal in text` (or, for the caseless
    ones, `literal.lower() in text.lower()`) answers one literal at a time: a literal
    listed twice is reported at both indices, overlapping and nested literals are all
    found, and an empty set or an empty text finds nothing."""
    from kb.core.scan import LiteralSet

    literals = ["Error", "RuntimeError", "NCCL", "nccl", "Error", "rank", "CUDA out of", "ÉTAT"]
    caseless = frozenset({2, 5, 7})
    literal_set = LiteralSet(literals, caseless)
    texts = ["RuntimeError: NCCL error on Rank 3", "cuda OUT OF memory", "", "état: ok",
             "ErrorError", "İstanbul rank", "nothing"]
    for text in texts:
        expected = {i for i, literal in enumerate(literals)
                    if (literal.lower() in text.lower() if i in caseless else literal in text)}
        assert sorted(literal_set.present(text)) == sorted(expected), text
    assert LiteralSet([]).present("anything") == []
