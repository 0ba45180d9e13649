"""Patterns rebuilt from the programs an earlier run compiled (kb.core.lazyre, the command
line's cache) are the patterns `re.compile` gives: the cache changes start-up time only."""

import re
import subprocess
import sys
from pathlib import Path

from kb.core import lazyre

FIXTURES = Path(__file__).parent / "fixtures"

RECORD_EVERY_PATTERN = """
import marshal, sys
from pathlib import Path
from kb.core import lazyre
lazyre.preload({})  # before the core's imports: their patterns are recorded too
from kb.core.analyze import analyze
for log in sorted(Path(sys.argv[1]).glob("*.log")):
    analyze(log.read_bytes())
sys.stdout.buffer.write(marshal.dumps(lazyre.recorded()))
"""


def test_every_pattern_the_fixtures_need_is_rebuilt_equal_to_re_compile():
    import _sre
    import marshal

    done = subprocess.run([sys.executable, "-c", RECORD_EVERY_PATTERN, str(FIXTURES)], capture_output=True, check=True)
    programs = marshal.loads(done.stdout)
    assert len(programs) > 200  # the core's patterns, not a handful
    for (pattern, flags), program in programs.items():
        assert _sre.compile(pattern, *program) == re.compile(pattern, flags), pattern


def test_a_program_the_engine_refuses_is_compiled_again(monkeypatch):
    monkeypatch.setattr(lazyre, "_PROGRAMS", {})
    monkeypatch.setattr(lazyre, "_RECORDED", {})
    monkeypatch.setattr(lazyre, "_RECORDING", False)
    flags, code, groups, groupindex, indexgroup = lazyre._program(r"(?P<word>\w+) failed", 0)
    damaged = (flags, [code[0], 999999, *code[2:]], groups, groupindex, indexgroup)
    lazyre.preload({(r"(?P<word>\w+) failed", 0): damaged})
    pattern = lazyre.compile(r"(?P<word>\w+) failed")
    assert pattern == re.compile(r"(?P<word>\w+) failed")
    assert pattern.search("allocation failed").group("word") == "allocation"
    assert (r"(?P<word>\w+) failed", 0) not in lazyre.recorded()


def test_only_programs_compiled_since_the_preload_are_recorded(monkeypatch):
    monkeypatch.setattr(lazyre, "_PROGRAMS", {})
    monkeypatch.setattr(lazyre, "_RECORDED", {})
    monkeypatch.setattr(lazyre, "_RECORDING", False)
    lazyre.compile(r"before\d")
    assert lazyre.recorded() == {}  # no preload (the service): nothing recorded
    known = {(r"known\d", 0): lazyre._program(r"known\d", 0)}
    lazyre.preload(known)
    assert lazyre.compile(r"known\d").match("known7")
    assert lazyre.compile(r"new\d", re.I).match("NEW7")
    assert list(lazyre.recorded()) == [(r"new\d", int(re.I))]
