"""kb.core.recommend: the patch-or-switch policy, as a pure function."""

from __future__ import annotations

import pytest

from kb.core.gpus import gpu_family
from kb.core.recommend import (
    ChainLink,
    FixEvidence,
    IncidentEvidence,
    Where,
    applies,
    rank_fixes,
    recommend,
    version_in,
)

HERE = Where(engine="vllm", engine_version="0.11.0", model_arch="kimi_k2", gpu_family="hopper")


def incident(*fixes: FixEvidence, limitation: bool = False, chain=()) -> IncidentEvidence:
    return IncidentEvidence(id=1, title="EAGLE-3 drafter rejected", engine="vllm",
                            engine_limitation=limitation, fixes=list(fixes), chain=list(chain))


def test_nothing_known_means_investigate():
    assert recommend(None, HERE).path == "investigate"
    advice = recommend(incident(), HERE)
    assert advice.path == "investigate" and "no fix" in advice.reason


def test_a_fix_known_to_work_means_patch_and_names_the_evidence():
    fix = FixEvidence(4, "Add kimi_k2 to the EAGLE-3 whitelist", "patch", worked=3)
    advice = recommend(incident(fix), HERE)
    assert (advice.path, advice.fix_id) == ("patch", 4)
    assert "whitelist" in advice.reason and "worked 3x" in advice.reason


def test_engine_limitation_means_switch_and_names_the_engine():
    switch = FixEvidence(7, "Serve with SGLang", "switch_engine",
                         change={"engine": "sglang", "engine_version": ">=0.5.4"}, worked=2)
    advice = recommend(incident(switch, limitation=True), HERE)
    assert (advice.path, advice.fix_id, advice.engine, advice.engine_version) == \
        ("switch_engine", 7, "sglang", ">=0.5.4")
    assert "engine limitation" in advice.reason and "sglang" in advice.reason


def test_limitation_without_a_switch_fix_still_says_switch():
    advice = recommend(incident(limitation=True), HERE)
    assert advice.path == "switch_engine" and advice.fix_id is None


def test_a_fix_proven_in_this_context_beats_the_limitation():
    fix = FixEvidence(4, "Patch", "patch", worked_here=1)
    assert recommend(incident(fix, limitation=True), HERE).path == "patch"


def test_long_follow_on_chain_means_switch():
    fix = FixEvidence(4, "Whitelist patch", "patch", worked=1)
    chain = [ChainLink(2, "missing image_token_index"), ChainLink(3, "no SupportsEagle3"),
             ChainLink(4, "15% acceptance rate")]
    advice = recommend(incident(fix, chain=chain), HERE)
    assert advice.path == "switch_engine"
    assert "3 more known crash" in advice.reason and "#3 no SupportsEagle3" in advice.reason
    short = recommend(incident(fix, chain=chain[:1]), HERE)
    assert short.path == "patch"


def test_chain_ending_in_a_limitation_means_switch():
    fix = FixEvidence(4, "Whitelist patch", "patch", worked=1)
    advice = recommend(incident(fix, chain=[ChainLink(9, "slow drafter", engine_limitation=True)]), HERE)
    assert advice.path == "switch_engine" and "engine limitation" in advice.reason


def test_in_engine_fixes_reported_failing_mean_switch():
    bad = FixEvidence(4, "NCCL_P2P_DISABLE=1", "workaround", worked=1, failed=3)
    switch = FixEvidence(5, "Use SGLang", "switch_engine", change={"engine": "sglang"})
    advice = recommend(incident(bad, switch), HERE)
    assert (advice.path, advice.fix_id, advice.engine) == ("switch_engine", 5, "sglang")
    assert "failed 3x" in advice.reason


def test_untested_fix_still_means_patch():
    advice = recommend(incident(FixEvidence(4, "Set --max-model-len", "config")), HERE)
    assert advice.path == "patch" and "no outcome" in advice.reason


def test_fix_whose_scope_excludes_this_context_is_not_recommended():
    fix = FixEvidence(4, "Downgrade to 0.9", "downgrade", applies_to={"engine_versions": "<0.10"},
                      worked=5)
    advice = recommend(incident(fix), HERE)
    assert advice.path == "investigate" and "do not apply" in advice.reason


def test_ranking_prefers_the_same_context():
    elsewhere = FixEvidence(1, "Elsewhere", "config", worked=5)
    here = FixEvidence(2, "Here", "patch", worked=1, worked_here=1)
    excluded = FixEvidence(3, "Excluded", "config", worked=9, applies_to={"model_archs": ["llama"]})
    assert [f.id for f in rank_fixes([elsewhere, excluded, here], HERE)] == [2, 1, 3]


def test_similar_match_prefixes_the_reason():
    fix = FixEvidence(4, "Whitelist patch", "patch", worked=1)
    advice = recommend(incident(fix), HERE, "similar")
    assert advice.path == "patch" and advice.reason.startswith("similar incident #1")
    assert recommend(incident(fix), HERE, "new").path == "investigate"


@pytest.mark.parametrize("name,family", [
    ("NVIDIA H100 80GB HBM3", "hopper"), ("NVIDIA B200", "blackwell"), ("NVIDIA A100-SXM4-80GB", "ampere"),
    ("Tesla V100-SXM2-32GB", "volta"), ("Tesla T4", "turing"), ("NVIDIA L40S", "ada"),
    ("NVIDIA GeForce RTX 4090", "ada"), ("NVIDIA GeForce RTX 5090", "blackwell"), (None, None),
    ("Mystery GPU", None),
])
def test_gpu_family(name, family):
    assert gpu_family(name) == family


def test_version_and_scope_checks():
    assert version_in("0.11.0", ">=0.10.2,<0.13") is True
    assert version_in("v0.9.2", ">=0.10.2") is False
    assert version_in("0.11.0rc1.dev12+g123", ">=0.11") is True
    assert version_in(None, ">=1") is None and version_in("1.0", "not a spec") is None
    assert applies({}, HERE) is True
    assert applies({"model_archs": ["kimi_k2"], "engine_versions": ">=0.10"}, HERE) is True
    assert applies({"gpu_families": ["blackwell"]}, HERE) is False
    assert applies({"model_archs": ["kimi_k2"]}, Where()) is None
