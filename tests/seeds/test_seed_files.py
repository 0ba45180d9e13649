"""The shipped seed knowledge base (seeds/<engine>/<slug>.yaml) follows the schema of
seeds/README.md, its cross-references hold, and the analyzer finds a root cause in every
example log. Pure file checks: no database, no service."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kb.core.analyze import analyze
from kb.core.fixschema import RecordError, check_fix

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
SEED_FILES = sorted(SEEDS.glob("*/*.yaml"))

KEYS = ("slug", "title", "engine", "affected_versions", "fixed_in", "model_archs",
        "gpu_families", "phase", "engine_limitation", "summary", "next", "links", "tags",
        "recommendation", "examples", "fixes")
FIX_KEYS = ("title", "kind", "description", "change", "applies_to", "worked", "failed")
CHANGE_KEYS = {"flags", "env", "diff", "version", "engine", "engine_version"}
APPLIES_KEYS = {"engine_versions", "model_archs", "gpu_families"}
ENGINES = {"vllm", "sglang", "tensorrt-llm", "tgi", "llama.cpp", "pytorch", "deepspeed", "ray", "other"}
PHASES = {"config", "startup", "weight_loading", "kv_cache_profiling", "cuda_graph_capture",
          "serving", "training", "shutdown"}
FIX_KINDS = {"config", "patch", "upgrade", "downgrade", "switch_engine", "workaround"}
IN_ENGINE = FIX_KINDS - {"switch_engine"}
PATHS = {"patch", "switch_engine", "investigate"}
GPU_FAMILIES = {"maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"}
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
LINK = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$")
MIN_LINES, MAX_LINES = 15, 60

# The EAGLE-3 on Kimi-K2.5 story of the context write-ups, in the order it unfolded.
KIMI_CHAIN = ["vllm-eagle3-unsupported-target-model-type",
              "vllm-kimi-k25-eagle3-missing-image-token-index",
              "vllm-eagle3-target-missing-supportseagle3",
              "vllm-eagle3-low-acceptance-kimi-k25"]


def _specifier(value: Any, where: str, problems: list[str]) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        problems.append(f"{where} must be a PEP 440 specifier string or null")
        return
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        problems.append(f"{where} is not a PEP 440 specifier set: {value!r}")


def _str_list(data: dict[str, Any], key: str, where: str, problems: list[str]) -> list[str]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{where}{key} must be a list of strings")
        return []
    return value


def _fix_problems(fix: Any, where: str) -> list[str]:
    if not isinstance(fix, dict):
        return [f"{where} must be a mapping"]
    problems = []
    if tuple(fix) != FIX_KEYS:
        problems.append(f"{where} keys must be {FIX_KEYS} in that order, got {tuple(fix)}")
    if not isinstance(fix.get("title"), str) or not fix["title"].strip():
        problems.append(f"{where}.title is required")
    kind = fix.get("kind")
    if kind not in FIX_KINDS:
        problems.append(f"{where}.kind {kind!r} is not one of {sorted(FIX_KINDS)}")
    if not isinstance(fix.get("description"), str) or len(fix["description"].split()) < 5:
        problems.append(f"{where}.description must say what to do in a sentence or more")
    change = fix.get("change")
    if not isinstance(change, dict) or not change:
        problems.append(f"{where}.change must name the exact change")
        change = {}
    unknown = set(change) - CHANGE_KEYS
    if unknown:
        problems.append(f"{where}.change has unknown keys {sorted(unknown)}")
    if "flags" in change and (not isinstance(change["flags"], list)
                              or not all(isinstance(f, str) and f for f in change["flags"])):
        problems.append(f"{where}.change.flags must be a list of strings")
    if "env" in change and (not isinstance(change["env"], dict)
                            or not all(isinstance(v, str) for v in change["env"].values())):
        problems.append(f"{where}.change.env must map variable names to string values")
    if "diff" in change and (not isinstance(change["diff"], str)
                             or not re.search(r"^--- .*\n\+\+\+ ", change["diff"], re.M)):
        problems.append(f"{where}.change.diff must be a unified diff (---/+++ headers)")
    if kind == "switch_engine" and not (change.get("engine") and change.get("engine_version")):
        problems.append(f"{where}: a switch_engine fix names change.engine and change.engine_version")
    if kind == "switch_engine":
        _specifier(change.get("engine_version"), f"{where}.change.engine_version", problems)
    if kind in {"upgrade", "downgrade"} and not change.get("version"):
        problems.append(f"{where}: an {kind} fix names change.version")
    if kind == "patch" and not (change.get("diff") or change.get("flags")):
        problems.append(f"{where}: a patch fix carries the diff")
    applies = fix.get("applies_to")
    if not isinstance(applies, dict):
        problems.append(f"{where}.applies_to must be a mapping ({{}} = everywhere)")
        applies = {}
    unknown = set(applies) - APPLIES_KEYS
    if unknown:
        problems.append(f"{where}.applies_to has unknown keys {sorted(unknown)}")
    _specifier(applies.get("engine_versions"), f"{where}.applies_to.engine_versions", problems)
    for key in ("model_archs", "gpu_families"):
        if applies.get(key) is not None and not isinstance(applies[key], list):
            problems.append(f"{where}.applies_to.{key} must be a list")
    for key in ("worked", "failed"):
        value = fix.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"{where}.{key} must be a count >= 0")
    return problems


def seed_problems(data: Any, path: Path | None = None) -> list[str]:
    """Everything wrong with one parsed seed file; [] when it follows the schema."""
    if not isinstance(data, dict):
        return ["a seed is a mapping"]
    problems: list[str] = []
    if tuple(data) != KEYS:
        problems.append(f"keys must be exactly {KEYS} in that order, got {tuple(data)}")
    slug = data.get("slug")
    if not isinstance(slug, str) or not SLUG.match(slug):
        problems.append(f"slug must be kebab-case, got {slug!r}")
    engine = data.get("engine")
    if engine not in ENGINES:
        problems.append(f"engine {engine!r} is not one of {sorted(ENGINES)}")
    if path is not None:
        if path.stem != slug:
            problems.append(f"file name {path.name} must be <slug>.yaml")
        if path.parent.name != engine:
            problems.append(f"file must live in seeds/{engine}/")
    for key in ("title", "summary"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            problems.append(f"{key} is required")
    _specifier(data.get("affected_versions"), "affected_versions", problems)
    fixed_in = data.get("fixed_in")
    if fixed_in is not None:
        try:
            Version(str(fixed_in))
        except InvalidVersion:
            problems.append(f"fixed_in must be a version or null, got {fixed_in!r}")
    _str_list(data, "model_archs", "", problems)
    for family in _str_list(data, "gpu_families", "", problems):
        if family not in GPU_FAMILIES:
            problems.append(f"gpu family {family!r} is not one of {sorted(GPU_FAMILIES)}")
    if data.get("phase") not in PHASES:
        problems.append(f"phase {data.get('phase')!r} is not one of {sorted(PHASES)}")
    if not isinstance(data.get("engine_limitation"), bool):
        problems.append("engine_limitation must be true or false")
    nxt = data.get("next")
    if nxt is not None and (not isinstance(nxt, str) or not SLUG.match(nxt) or nxt == slug):
        problems.append(f"next must be another incident's slug or null, got {nxt!r}")
    links = _str_list(data, "links", "", problems)
    if not links:
        problems.append("links must name at least one public upstream issue or pull request")
    for link in links:
        if not LINK.match(link):
            problems.append(f"link {link!r} is not a GitHub issue/pull request URL")
    if not _str_list(data, "tags", "", problems):
        problems.append("tags must not be empty")
    recommendation = data.get("recommendation")
    if recommendation not in PATHS:
        problems.append(f"recommendation {recommendation!r} is not one of {sorted(PATHS)}")
    examples = data.get("examples")
    if not isinstance(examples, list) or len(examples) < 2:
        # two or more, differing in version, paths, ranks and capture shape (seeds/README.md)
        problems.append("examples must list at least two logs")
        examples = examples if isinstance(examples, list) else []
    names = set()
    for n, example in enumerate(examples):
        where = f"examples[{n}]"
        if not isinstance(example, dict) or set(example) != {"name", "log"}:
            problems.append(f"{where} must have exactly a name and a log")
            continue
        if not isinstance(example["name"], str) or not SLUG.match(example["name"].replace(".", "-")):
            problems.append(f"{where}.name must be a short kebab-case label")
        if example["name"] in names:
            problems.append(f"{where}.name {example['name']!r} is used twice")
        names.add(example["name"])
        log = example["log"]
        if not isinstance(log, str):
            problems.append(f"{where}.log must be text")
            continue
        lines = log.count("\n")
        if not MIN_LINES <= lines <= MAX_LINES:
            problems.append(f"{where}.log has {lines} lines, keep it within {MIN_LINES}-{MAX_LINES}")
    fixes = data.get("fixes")
    if not isinstance(fixes, list):
        problems.append("fixes must be a list")
        fixes = []
    for n, fix in enumerate(fixes):
        problems += _fix_problems(fix, f"fixes[{n}]")
    problems += _recommendation_problems(data, [f for f in fixes if isinstance(f, dict)])
    return problems


def _recommendation_problems(data: dict[str, Any], fixes: list[dict[str, Any]]) -> list[str]:
    """The declared path must be backed by the fixes and their counts. An in-engine fix
    that has not failed more often than it worked backs `patch`, as in kb/core/recommend.py
    (rule 6): that includes an upstream fix no thread has reported on yet (0/0)."""
    recommendation = data.get("recommendation")
    working = [f for f in fixes if f.get("kind") in IN_ENGINE
               and isinstance(f.get("worked"), int) and isinstance(f.get("failed"), int)
               and f["worked"] >= f["failed"]]
    proven = [f for f in working if f["worked"] > 0]
    switches = [f for f in fixes if f.get("kind") == "switch_engine"]
    problems = []
    if recommendation == "patch" and not working:
        problems.append("recommendation patch needs an in-engine fix that worked at least as often as it failed")
    if recommendation == "switch_engine" and not switches:
        problems.append("recommendation switch_engine needs a switch_engine fix naming the engine")
    if recommendation == "switch_engine" and not (data.get("engine_limitation") or data.get("next")):
        problems.append("switch_engine is advised for engine limitations or for a chain of crashes")
    if recommendation == "investigate" and fixes:
        problems.append("recommendation investigate means nothing is known: list no fix")
    if data.get("engine_limitation") and recommendation != "switch_engine":
        problems.append("an engine limitation with no in-engine fix is answered with switch_engine")
    if data.get("engine_limitation") and proven:
        problems.append("an engine limitation cannot also have a working in-engine fix")
    return problems


def _load(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def seeds() -> dict[str, dict[str, Any]]:
    return {data["slug"]: data for data in map(_load, SEED_FILES)}


def test_the_knowledge_base_is_not_empty():
    assert len(SEED_FILES) >= 55
    engines = {path.parent.name for path in SEED_FILES}
    assert {"vllm", "sglang", "tensorrt-llm", "tgi", "pytorch"} <= engines


# Issue 14 (breadth): at least this many incidents per engine, and in all.
MIN_PER_ENGINE = 15
ENGINES_WITH_MINIMUM = ("vllm", "sglang", "tensorrt-llm", "tgi", "llama.cpp", "pytorch", "deepspeed", "ray")
MIN_TOTAL = 200


def test_every_engine_has_its_minimum_of_incidents():
    per_engine = {name: sum(1 for path in SEED_FILES if path.parent.name == name) for name in ENGINES_WITH_MINIMUM}
    short = {name: count for name, count in per_engine.items() if count < MIN_PER_ENGINE}
    assert short == {}, f"engines below {MIN_PER_ENGINE} incidents: {short}"
    assert len(SEED_FILES) >= MIN_TOTAL


def test_every_incident_has_a_fix_with_an_exact_change(seeds):
    """Issue 14: every incident carries a fix whose change is exact (the schema kb seed
    and the API apply: exact values, no placeholders)."""
    assert {slug for slug, data in seeds.items() if not data["fixes"]} == set()
    refused = {}
    for slug, data in seeds.items():
        for n, fix in enumerate(data["fixes"]):
            try:  # the schema kb seed and the API apply: exact values, no placeholders
                check_fix(fix["kind"], fix["change"], fix["applies_to"])
            except RecordError as error:
                refused[f"{slug}: fixes[{n}]"] = str(error)
    assert refused == {}


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.stem)
def test_seed_file_follows_the_schema(path: Path):
    problems = seed_problems(_load(path), path)
    assert problems == [], f"{path.relative_to(SEEDS.parent)}:\n  " + "\n  ".join(problems)


def _valid_seed() -> dict[str, Any]:
    """A minimal valid seed to break in the negative tests."""
    log = "\n".join(f"INFO 01-01 00:00:{i:02d} [core.py:1] noise {i}" for i in range(14))
    log += "\nValueError: No available memory for the cache blocks.\n"
    return {
        "slug": "a-valid-seed", "title": "A valid seed", "engine": "vllm",
        "affected_versions": ">=0.6,<0.12", "fixed_in": None, "model_archs": [],
        "gpu_families": ["hopper"], "phase": "kv_cache_profiling", "engine_limitation": False,
        "summary": "Why it happens.", "next": None,
        "links": ["https://github.com/vllm-project/vllm/issues/10439"], "tags": ["kv-cache"],
        "recommendation": "patch",
        "examples": [{"name": "one", "log": log}, {"name": "two", "log": log.replace("00:00:", "09:41:")}],
        "fixes": [{"title": "Raise it", "kind": "config",
                   "description": "Raise gpu_memory_utilization so blocks fit.",
                   "change": {"flags": ["--gpu-memory-utilization 0.9"]}, "applies_to": {},
                   "worked": 2, "failed": 0}],
    }


def test_the_validator_accepts_a_valid_seed():
    assert seed_problems(_valid_seed()) == []


def test_an_upstream_fix_nobody_reported_on_yet_backs_patch():
    """0 worked / 0 failed: the service advises it ("no outcome reported yet"), so the
    seed declares patch; one failure more than it worked and it no longer does."""
    data = _valid_seed()
    data["fixes"][0].update(worked=0, failed=0)
    assert seed_problems(data) == []
    data["fixes"][0].update(failed=1)
    assert any("worked at least as often" in p for p in seed_problems(data))


@pytest.mark.parametrize("breakage,expected", [
    (lambda d: d.update(slug="Not_Kebab"), "kebab-case"),
    (lambda d: d.pop("summary"), "keys must be exactly"),
    (lambda d: d.update(engine="llamacpp"), "engine"),
    (lambda d: d.update(phase="lunch"), "phase"),
    (lambda d: d.update(affected_versions="version ten"), "PEP 440"),
    (lambda d: d.update(fixed_in="soon"), "fixed_in"),
    (lambda d: d.update(gpu_families=["potato"]), "gpu family"),
    (lambda d: d.update(links=["https://example.com/bug"]), "GitHub"),
    (lambda d: d.update(recommendation="pray"), "recommendation"),
    (lambda d: d["examples"][0].update(log="too short\n"), "lines"),
    (lambda d: d["examples"].pop(), "at least two logs"),
    (lambda d: d["fixes"][0].update(kind="magic"), "kind"),
    (lambda d: d["fixes"][0].update(change={}), "exact change"),
    (lambda d: d["fixes"][0].update(worked=-1), "count"),
    (lambda d: d["fixes"][0].update(kind="switch_engine", change={"engine": "sglang"}), "engine_version"),
    (lambda d: d["fixes"][0].update(failed=5), "worked at least as often"),
    (lambda d: d.update(recommendation="switch_engine"), "switch_engine fix"),
    (lambda d: d.update(recommendation="investigate"), "list no fix"),
    (lambda d: d.update(engine_limitation=True), "engine limitation"),
])
def test_the_validator_rejects_a_broken_seed(breakage, expected):
    data = _valid_seed()
    breakage(data)
    problems = seed_problems(data)
    assert any(expected in p for p in problems), problems


def test_slugs_are_unique_and_next_points_to_a_seed(seeds):
    assert len(seeds) == len(SEED_FILES)
    for slug, data in seeds.items():
        assert data["next"] is None or data["next"] in seeds, (slug, data["next"])


def test_next_chains_end(seeds):
    for slug in seeds:
        seen, current = [], slug
        while current is not None:
            assert current not in seen, f"next cycle: {' -> '.join(seen + [current])}"
            seen.append(current)
            current = seeds[current]["next"]


def test_the_eagle3_kimi_chain_of_the_context_write_ups(seeds):
    chain, current = [], KIMI_CHAIN[0]
    while current is not None:
        chain.append(current)
        current = seeds[current]["next"]
    assert chain == KIMI_CHAIN
    last = seeds[KIMI_CHAIN[-1]]
    assert last["engine_limitation"] and last["recommendation"] == "switch_engine"
    switch = next(f for f in last["fixes"] if f["kind"] == "switch_engine")
    assert switch["change"]["engine"] == "sglang"
    assert "kimi_k2" in seeds[KIMI_CHAIN[0]]["model_archs"]
    whitelist_patch = seeds[KIMI_CHAIN[0]]["fixes"][0]["change"]["diff"]
    assert '"kimi_k2"' in whitelist_patch and "eagle3_target_supported" in whitelist_patch
    assert "media_placeholder_token_id" in seeds[KIMI_CHAIN[1]]["fixes"][0]["change"]["diff"]
    assert "SupportsEagle3" in seeds[KIMI_CHAIN[2]]["fixes"][0]["change"]["diff"]
    dp = seeds["vllm-dp-local-rank-out-of-bounds"]
    assert all("DP adjusted local rank" in e["log"] for e in dp["examples"])


def test_two_examples_of_one_incident_differ(seeds):
    """Fingerprints are exercised across versions, paths and pids, not on copies."""
    for slug, data in seeds.items():
        logs = [e["log"] for e in data["examples"]]
        assert len(set(logs)) == len(logs), slug


EXAMPLES = [(path.stem, example["name"], example["log"])
            for path in SEED_FILES for example in _load(path)["examples"]]


def _found_in_log(event: Any, log: str) -> bool:
    """The root cause is something the log says: its exception type is printed, or, for
    errors the analyzer names itself (a signal, an OOM kill, an ERROR-only line), its
    message is."""
    exception = event.exception.strip()
    candidates = {exception, exception.rsplit(".", 1)[-1], exception.rsplit("::", 1)[-1]}
    if any(c and c in log for c in candidates):
        return True
    first_line = (event.message or "").strip().splitlines()[:1]
    return bool(first_line) and len(first_line[0]) >= 8 and first_line[0][:200] in log


@pytest.mark.parametrize("slug,name,log", EXAMPLES, ids=[f"{s}:{n}" for s, n, _ in EXAMPLES])
def test_the_analyzer_finds_a_root_cause_in_every_example(slug, name, log):
    analysis = analyze(log.encode("utf-8"))
    root = analysis.root_cause
    assert root is not None, f"{slug}:{name}: no root cause found"
    assert _found_in_log(root, log), f"{slug}:{name}: {root.exception}: {root.message[:120]}"
