"""The fix schema: each kind's change holds what it needs, versions parse, names are
known, placeholders are refused, and the refusal names the field."""

from __future__ import annotations

import pytest

from kb.core.fixschema import RecordError, check_applies_to, check_change, check_fix

GOOD = [
    ("config", {"flags": ["--max-model-len 32768"]}),
    ("config", {"env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}}),
    ("workaround", {"env": {"NCCL_P2P_DISABLE": 1}, "flags": ["--enforce-eager"]}),
    ("patch", {"diff": "--- a/vllm/x.py\n+++ b/vllm/x.py\n@@ -1,3 +1,3 @@\n ...\n-a\n+b\n"}),
    ("upgrade", {"version": "0.11.0"}),
    ("upgrade", {"version": "transformers>=4.51.0"}),
    ("downgrade", {"version": "torch==2.3.1+cu118"}),
    ("switch_engine", {"engine": "sglang", "engine_version": ">=0.5.4"}),
]
BAD = [
    ("prayer", {"flags": ["--x"]}, "kind"),
    ("config", {}, "change"),
    ("config", {"gpu_memory_utilization": "0.9"}, "change.gpu_memory_utilization"),
    ("config", {"flags": "--max-model-len 32768"}, "change.flags"),
    ("config", {"flags": ["docker run --ipc=host ..."]}, "change.flags[0]"),
    ("config", {"env": {"VLLM_HOST_IP": "<ip of the head node>"}}, "change.env.VLLM_HOST_IP"),
    ("config", {"env": {"not a name": "1"}}, "change.env"),
    ("patch", {"flags": ["--x"]}, "change"),
    ("upgrade", {"version": "latest"}, "change.version"),
    ("upgrade", {"version": "transformers"}, "change.version"),
    ("switch_engine", {"engine_version": ">=0.5"}, "change"),
    ("switch_engine", {"engine": "exllama", "engine_version": ">=0.5"}, "change.engine"),
    ("switch_engine", {"engine": "sglang", "engine_version": "newest"}, "change.engine_version"),
]


@pytest.mark.parametrize(("kind", "change"), GOOD)
def test_exact_changes_pass(kind, change):
    check_change(kind, change)


@pytest.mark.parametrize(("kind", "change", "field"), BAD)
def test_a_bad_change_is_refused_naming_its_field(kind, change, field):
    with pytest.raises(RecordError) as refused:
        check_change(kind, change)
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field}: ")


@pytest.mark.parametrize(("applies_to", "field"), [
    ({"engine_versions": ">=0.10,<<0.12"}, "applies_to.engine_versions"),
    ({"gpu_families": ["hopper", "tesla"]}, "applies_to.gpu_families[1]"),
    ({"model_archs": "qwen3"}, "applies_to.model_archs"),
    ({"versions": ">=0.10"}, "applies_to.versions"),
    ({"engine": "exllama"}, "applies_to.engine"),
])
def test_bad_applicability_is_refused_naming_its_field(applies_to, field):
    with pytest.raises(RecordError) as refused:
        check_applies_to(applies_to)
    assert refused.value.field == field


def test_good_applicability():
    check_fix("config", {"flags": ["--enforce-eager"]},
              {"engine": "vllm", "engine_versions": ">=0.10,<0.12", "model_archs": ["qwen3"],
               "gpu_families": ["hopper", "ampere"]})
    check_fix("config", {"flags": ["--enforce-eager"]}, {"engine_versions": "0.10.1"})
