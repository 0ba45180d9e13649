"""What a fix record must hold to be knowledge: one schema per fix kind, checked where a
fix enters the KB (seed files, the API, the UI), so a bad record is refused naming its
field and nothing half-written is stored.

A fix's `change` is the exact change a person applies: `config` and `workaround` give
flags, env vars or a diff; `patch` a diff; `upgrade` and `downgrade` the target version
(an engine version, or a pip requirement when the change is to a dependency);
`switch_engine` the engine and its version range. Versions and ranges must parse as
PEP 440, engines and GPU families must be ones the KB knows, and no value may be a
placeholder (`...`, `<model>`): a fix nobody can apply verbatim is not a fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kb.core import lazyre
from kb.core.engines import ENGINES
from kb.core.gpus import GPU_FAMILIES
from kb.core.recommend import FIX_KINDS

FAMILIES = tuple(dict.fromkeys(family for _, family in GPU_FAMILIES))

# kind -> (keys of `change` it may hold, keys of which it needs at least one)
CHANGE_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "config": (frozenset({"flags", "env", "diff"}), frozenset({"flags", "env", "diff"})),
    "workaround": (frozenset({"flags", "env", "diff"}), frozenset({"flags", "env", "diff"})),
    "patch": (frozenset({"diff", "flags", "env"}), frozenset({"diff"})),
    "upgrade": (frozenset({"version", "flags", "env"}), frozenset({"version"})),
    "downgrade": (frozenset({"version", "flags", "env"}), frozenset({"version"})),
    "switch_engine": (frozenset({"engine", "engine_version", "flags"}),
                      frozenset({"engine"})),
}
APPLIES_KEYS = frozenset({"engine", "engine_versions", "model_archs", "gpu_families"})
_PLACEHOLDER = lazyre.compile(r"\.\.\.|…|<[a-z][\w -]*>|\bTODO\b|\bXXX\b", re.I)
_ENV_NAME = lazyre.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class RecordError(ValueError):
    """A record breaks its schema: `field` names where (`change.version`), the message
    says what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _text(value: Any, field: str, *, placeholders: bool = True) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RecordError(field, "must be a non-empty string")
    if placeholders and _PLACEHOLDER.search(value):
        raise RecordError(field, f"holds a placeholder ({_PLACEHOLDER.search(value).group(0)!r}): "
                                 "give the exact value")
    return value


def check_specifier(value: Any, field: str) -> None:
    """A PEP 440 version range (`>=0.10,<0.13`); a bare version means exactly it."""
    text = _text(value, field)
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        try:
            Version(text)
        except InvalidVersion:
            raise RecordError(field, f"{text!r} is not a PEP 440 version range "
                                     "(e.g. '>=0.10,<0.13')") from None


def check_version(value: Any, field: str) -> None:
    try:
        Version(_text(value, field))
    except InvalidVersion:
        raise RecordError(field, f"{value!r} is not a PEP 440 version (e.g. '0.11.0')") from None


_BUILD_TAG = lazyre.compile(r"b\d{3,6}\Z")  # llama.cpp names its releases by build number


def _check_target_version(value: Any, field: str) -> None:
    """An upgrade's target: the engine's version (llama.cpp's build tags, `b4514`,
    included), or a pip requirement with a version (`transformers>=4.51.0`)."""
    text = _text(value, field)
    if _BUILD_TAG.match(text):
        return
    try:
        Version(text)
        return
    except InvalidVersion:
        pass
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        requirement = None
    if requirement is None or not requirement.specifier:
        raise RecordError(field, f"{text!r} is neither a version ('0.11.0') nor a requirement "
                                 "with one ('transformers>=4.51.0')")


def check_engine(value: Any, field: str) -> None:
    if value not in ENGINES:
        raise RecordError(field, f"{value!r} is not an engine the KB knows ({', '.join(ENGINES)})")


def check_families(value: Any, field: str) -> None:
    for n, family in enumerate(_str_list(value, field)):
        if family.lower() not in FAMILIES:
            raise RecordError(f"{field}[{n}]", f"{family!r} is not a GPU family ({', '.join(FAMILIES)})")


def _str_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list):
        raise RecordError(field, "must be a list of strings")
    for n, item in enumerate(value):
        _text(item, f"{field}[{n}]")
    return value


def check_change(kind: Any, change: Any) -> None:
    """`change` holds what its kind needs, each value in its form."""
    if kind not in FIX_KINDS:
        raise RecordError("kind", f"{kind!r} is not a fix kind ({', '.join(FIX_KINDS)})")
    if not isinstance(change, Mapping):
        raise RecordError("change", "must be an object")
    allowed, needed = CHANGE_KEYS[kind]
    for key in change:
        if key not in allowed:
            raise RecordError(f"change.{key}", f"is not a key of a {kind} fix "
                                               f"(it holds {', '.join(sorted(allowed))})")
    if not needed & {key for key, value in change.items() if value not in (None, "", [], {})}:
        raise RecordError("change", f"a {kind} fix needs {' or '.join(sorted(needed))}")
    for key, value in change.items():
        field = f"change.{key}"
        if key == "flags":
            if not value:
                raise RecordError(field, "must list at least one flag")
            _str_list(value, field)
        elif key == "env":
            if not isinstance(value, Mapping) or not value:
                raise RecordError(field, "must map variable names to values")
            for name, setting in value.items():
                if not isinstance(name, str) or not _ENV_NAME.match(name):
                    raise RecordError(field, f"{name!r} is not an environment variable name")
                if isinstance(setting, bool) or not isinstance(setting, str | int | float):
                    raise RecordError(f"{field}.{name}", "must be a string or a number")
                _text(str(setting), f"{field}.{name}")
        elif key == "diff":
            _text(value, field, placeholders=False)  # a diff's own "..." lines are real text
        elif key == "version":
            _check_target_version(value, field)
        elif key == "engine":
            check_engine(value, field)
        elif key == "engine_version":
            check_specifier(value, field)


def check_applies_to(applies_to: Any) -> None:
    """Where a fix is known to apply: engine, its version range, model types, GPU
    families ({} = everywhere)."""
    if not isinstance(applies_to, Mapping):
        raise RecordError("applies_to", "must be an object")
    for key, value in applies_to.items():
        field = f"applies_to.{key}"
        if key not in APPLIES_KEYS:
            raise RecordError(field, f"is not a key of applies_to ({', '.join(sorted(APPLIES_KEYS))})")
        if value in (None, [], ""):
            continue
        if key == "engine":
            check_engine(value, field)
        elif key == "engine_versions":
            check_specifier(value, field)
        elif key == "model_archs":
            _str_list(value, field)
        else:
            check_families(value, field)


def check_fix(kind: Any, change: Any, applies_to: Any) -> None:
    check_change(kind, change)
    check_applies_to(applies_to)
