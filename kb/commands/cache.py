"""The command line's cache directory and what `kb analyze` keeps there: compiled
pre-filter databases (kb.core.scan) and compiled regular-expression programs
(kb.core.lazyre). Both only save start-up time; a missing, stale or unreadable entry
means compiling again, never another answer. Imports nothing of the core but lazyre, so
the programs are loaded before the core's modules compile their patterns."""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path

from kb.core import lazyre

PROGRAMS_KEPT = 4096  # a cache grown past this (many upgrades) is started again


def cache_dir() -> Path | None:
    """Where compiled databases and programs are kept. On Linux the XDG rule is read
    here (what platformdirs answers, without its import on every `kb analyze`)."""
    try:
        if os.environ.get("KB_CACHE_DIR"):
            return Path(os.environ["KB_CACHE_DIR"])
        if sys.platform.startswith("linux"):
            return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crash-kb"
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("crash-kb"))
    except Exception:  # no home directory: compile every time
        return None


def _programs_file(directory: Path) -> Path:
    return directory / f"re-{lazyre.program_tag()}.marshal"


def load_programs() -> None:
    """Hand the programs an earlier run compiled to kb.core.lazyre (call it before the
    core is imported: its modules compile patterns at import)."""
    directory = cache_dir()
    programs = {}
    if directory is not None:
        try:
            loaded = marshal.loads(_programs_file(directory).read_bytes())
            if isinstance(loaded, dict):
                programs = loaded
        except Exception:  # missing or damaged: compiled again, then written anew
            pass
    lazyre.preload(programs)


def save_programs() -> None:
    """Keep the programs compiled in this run that the cache did not hold, beside those
    load_programs read (the file is written whole: what the engine refused is left out)."""
    new = lazyre.recorded()
    directory = cache_dir()
    if not new or directory is None:
        return
    path = _programs_file(directory)
    kept = lazyre.preloaded()
    if len(kept) + len(new) > PROGRAMS_KEPT:
        kept = {}
    kept.update(new)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(marshal.dumps(kept))
        partial.replace(path)
    except (OSError, ValueError):
        pass
