"""`kb analyze` reads a log in chunks, the next one on another thread: the same analysis
as the whole log at once, and a read error still reaches the caller."""

import io
from pathlib import Path

import pytest

from kb.commands import analysis
from kb.core.analyze import analyze

FIXTURES = Path(__file__).parent / "fixtures"


def test_chunked_reading_gives_the_analysis_of_the_whole_log(monkeypatch):
    monkeypatch.setattr(analysis, "CHUNK", 4096)  # many chunks, both buffers reused
    data = (FIXTURES / "nccl-warn-lines-then-unhandled-cuda-error.log").read_bytes()
    assert len(data) > 3 * 4096
    assert analysis.analyze_stream(io.BytesIO(data)).to_dict() == analyze(data).to_dict()


class _FailingStream(io.RawIOBase):
    """A file whose second read fails, as a disk or a network mount can."""

    def __init__(self) -> None:
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.reads += 1
        if self.reads > 1:
            raise OSError(5, "Input/output error")
        buffer[:6] = b"hello\n"
        return 6


def test_a_read_error_is_raised_to_the_caller():
    with pytest.raises(OSError, match="Input/output error"):
        analysis.analyze_stream(_FailingStream())
