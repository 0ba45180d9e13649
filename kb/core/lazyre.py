"""Regular expressions compiled on first use.

The core knows ~200 patterns; compiling them all costs more than analysing a typical log,
and most of them are never needed for a given log (a TGI pattern for a vLLM log). `lazy`
returns an object with the `re.Pattern` methods the core uses that compiles itself the
first time one is called. From then on those methods are the compiled pattern's own
(bound C methods in the instance's slots): the hot patterns, matched hundreds of times
per log, pay no Python call on top of the match."""

from __future__ import annotations

import re
from typing import Any

_METHODS = ("search", "match", "fullmatch", "finditer", "sub", "subn")


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
            compiled = re.compile(self.pattern, self.flags)
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
