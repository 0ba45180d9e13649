"""Regular expressions compiled on first use.

The core knows ~200 patterns; compiling them all costs more than analysing a typical log,
and most of them are never needed for a given log (a TGI pattern for a vLLM log). `lazy`
returns an object with the `re.Pattern` methods the core uses that compiles itself the
first time one is called."""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, string: str, *args: Any) -> re.Match[str] | None:
        return (self._compiled or self.compiled()).search(string, *args)

    def match(self, string: str, *args: Any) -> re.Match[str] | None:
        return (self._compiled or self.compiled()).match(string, *args)

    def fullmatch(self, string: str, *args: Any) -> re.Match[str] | None:
        return (self._compiled or self.compiled()).fullmatch(string, *args)

    def finditer(self, string: str, *args: Any):
        return (self._compiled or self.compiled()).finditer(string, *args)

    def sub(self, replacement: Any, string: str, count: int = 0) -> str:
        return (self._compiled or self.compiled()).sub(replacement, string, count)

    def subn(self, replacement: Any, string: str, count: int = 0) -> tuple[str, int]:
        return (self._compiled or self.compiled()).subn(replacement, string, count)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern: str, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
