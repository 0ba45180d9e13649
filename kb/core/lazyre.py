"""Regular expressions compiled on first use, or rebuilt from programs an earlier run compiled.

The core knows ~270 patterns; compiling them all costs more than analysing a typical log,
and most of them are never needed for a given log (a TGI pattern for a vLLM log). `lazy`
returns an object with the `re.Pattern` methods the core uses that compiles itself the
first time one is called. From then on those methods are the compiled pattern's own
(bound C methods in the instance's slots): the hot patterns, matched hundreds of times
per log, pay no Python call on top of the match.

`compile` is `re.compile` for the core. A command-line run still parses and compiles the
patterns it needs (~25 ms for a large vLLM log, a tenth of the analysis): with programs
`preload`ed (the command line keeps them in its cache directory) the same pattern objects
are rebuilt from the compiled programs in ~2 ms. The cache holds no decisions: a pattern
rebuilt from its program equals the one `re.compile` returns (same pattern, flags and
code, which `re.Pattern` equality compares), and any program this interpreter will not
take (another version, a damaged file) is compiled again."""

from __future__ import annotations

import re
import sys
from typing import Any

try:  # the engine behind `re`; its compiler's output is what a program is
    import _sre
    from re import _compiler, _parser
except ImportError:  # pragma: no cover - another Python implementation
    _sre = None

_METHODS = ("search", "match", "fullmatch", "finditer", "sub", "subn")

# (pattern, flags) -> the arguments `_sre.compile` takes after the pattern
Program = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
_PROGRAMS: dict[tuple[str, int], Program] = {}
_RECORDED: dict[tuple[str, int], Program] = {}
_RECORDING = False


def program_tag() -> str:
    """Which interpreter a program is valid for: its exact version and regex engine."""
    magic = getattr(_sre, "MAGIC", 0)
    return f"{sys.implementation.cache_tag}-{magic}-{sys.hexversion:x}"


def preload(programs: dict[tuple[str, int], Program]) -> None:
    """Take programs compiled by an earlier run of this interpreter (see `program_tag`),
    and from now on record the programs of patterns compiled anew (see `recorded`)."""
    global _RECORDING
    if _sre is not None:
        _PROGRAMS.update(programs)
        _RECORDING = True


def recorded() -> dict[tuple[str, int], Program]:
    """The programs compiled since `preload` that it did not hold."""
    return dict(_RECORDED)


def preloaded() -> dict[tuple[str, int], Program]:
    """The programs `preload` took, but those the engine refused."""
    return dict(_PROGRAMS)


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:  # noqa: A001 - re.compile's name
    key = (pattern, int(flags))
    program = _PROGRAMS.get(key)
    if program is None and _RECORDING and isinstance(pattern, str):
        program = _RECORDED[key] = _program(pattern, int(flags))
    if program is not None:
        try:
            return _sre.compile(pattern, *program)
        except Exception:  # not this engine's program (its validator refuses it): compile it
            _PROGRAMS.pop(key, None)
            _RECORDED.pop(key, None)
    return re.compile(pattern, flags)


def _program(pattern: str, flags: int) -> Program:
    """What `re.compile` hands to the engine, as `re._compiler.compile` computes it."""
    parsed = _parser.parse(pattern, flags)
    code = [int(op) for op in _compiler._code(parsed, flags)]
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return int(flags | parsed.state.flags), code, parsed.state.groups - 1, groupindex, tuple(indexgroup)


class LazyPattern:
    __slots__ = ("pattern", "flags", "_compiled", *_METHODS)

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None
        for name in _METHODS:
            setattr(self, name, _FirstCall(self, name))

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            compiled = compile(self.pattern, self.flags)
            for name in _METHODS:
                setattr(self, name, getattr(compiled, name))
            self._compiled = compiled
        return self._compiled

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


class _FirstCall:
    """A method of a LazyPattern not compiled yet: compiles it, then calls the real one."""

    __slots__ = ("owner", "name")

    def __init__(self, owner: LazyPattern, name: str) -> None:
        self.owner = owner
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.owner.compiled(), self.name)(*args, **kwargs)


def lazy(pattern: str, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
