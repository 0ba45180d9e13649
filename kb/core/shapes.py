"""Re-capture a plain crash log the way a capture layer would have stored or printed it.

Deployments hand logs over through docker, Kubernetes, journald, syslog, Slurm, MPI, Ray,
coloured terminals, terminal copy-paste, quote-replies and indented pastes, and each layer
adds its own prefix or envelope.
Tests and `kb eval --shapes` run the analyzer on `recapture(log, shape)` for every shape in
SHAPES to check that its answer does not depend on how the log was captured.

The formats follow the tools' sources: docker compose's log formatter, moby's json-file
encoder and 16 KiB copier, containerd's CRI logger, the kubelet's log reader, journalctl's
short output, RFC 5424 / RFC 3164 as docker's syslog driver sends them, slurm's
write_labelled_message, Open MPI's iof tags, Ray's print_worker_logs and vLLM's
ColoredFormatter. Pure (no I/O, standard library only) and deterministic for a seed:
timestamps start at a base time derived from the seed and advance 1-50 ms per record.
Output ends with a newline exactly when the input does (the tools themselves always end
their last record; container formats still mark an unterminated last line: no "\\n" in the
json-file "log", tag P in CRI).
"""

from __future__ import annotations

import random
import re
import time

from kb.core import lazyre
from kb.core.capture import ESCAPED_ESC, LOST_ESC

SHAPES: tuple[str, ...] = (
    "compose", "docker-json", "cri", "kubectl-timestamps", "journald", "syslog-5424",
    "syslog-3164", "srun", "mpirun", "ray", "quote", "indented", "ansi", "ansi-pasted", "crlf", "wrap-80", "wrap-120",
)

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_BASE_NS = 1_714_564_800 * 10**9 + 123_456_789  # 2024-05-01T12:00:00.123456789Z
_SEED_STEP_NS = 90_061_001_001_001  # 1 d 1 h 1 min 1.001001001 s: seeds walk days and digits
_DOCKER_CHUNK = 16 * 1024  # moby copier buffer: a full buffer without newline is a partial
_CRI_MAX_LINE = 16 * 1024  # containerd max_container_log_line_size default
_JOURNALD_LINE_MAX = 48 * 1024  # journald LineMax= default: longer lines are split

_PROC_PREFIX = lazyre.compile(r"\((?:[^()\s]+ )?pid=\d+(?:, ip=[0-9.]+)?\) ")
_RAY_PREFIX = lazyre.compile(r"\([^()\s]+ pid=\d+, ip=[0-9.]+\) ")
_TB_START = lazyre.compile(r"Traceback \(most recent call last\):|During handling of the above|"
                       r"The above exception was the direct cause")
_ERROR_WORD = lazyre.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
_VLLM_HEAD = lazyre.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                        r"(\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (\[[^\]\s]+:\d+\])")
_LEVEL_WORD = lazyre.compile(r"\b(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")
_LEVEL_COLOUR = {"DEBUG": "37", "INFO": "32", "WARNING": "33", "WARN": "33", "ERROR": "31",
                 "CRITICAL": "35", "FATAL": "1;31"}
_SGR = lazyre.compile(r"\x1b\[[0-9;]*m|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def _iso(ns: int, digits: int | None) -> str:
    """RFC 3339 in UTC with `digits` fraction digits; None is Go's RFC3339Nano, which drops
    trailing zeros (and the dot with them) as dockerd and containerd write it."""
    t, frac = time.gmtime(ns // 10**9), f"{ns % 10**9:09d}"
    head = (f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
            f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}")
    frac = frac.rstrip("0") if digits is None else frac[:digits]
    return f"{head}.{frac}Z" if frac else f"{head}Z"


def _bsd(ns: int, pad: str) -> str:
    """`May  1 12:00:00` (syslog, Go's time.Stamp: pad " ") or `May 01 12:00:00` (journalctl)."""
    t = time.gmtime(ns // 10**9)
    return f"{_MONTHS[t.tm_mon - 1]} {t.tm_mday:{pad}>2} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"


def _chunks(line: str, size: int, split_at_full: bool) -> list[str]:
    """Byte-sized pieces of a line (the runtimes cut bytes, even inside a UTF-8 sequence).
    split_at_full: docker also cuts a line of exactly `size` bytes (its buffer is full)."""
    raw = line.encode("utf-8", "surrogateescape")
    cut = len(raw) - (0 if split_at_full else 1)
    pieces = [raw[i:i + size] for i in range(0, max(cut, 0) // size * size, size)]
    pieces.append(raw[len(pieces) * size:])
    return [p.decode("utf-8", "surrogateescape") for p in pieces]


def _go_json(s: str) -> str:
    """A JSON string as moby's json-file driver writes it: HTML-safe, bad bytes as \\ufffd."""
    out = ['"']
    for c in s:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif o < 0x20 or c in "<>&":
            out.append(f"\\u{o:04x}")
        elif 0xDC80 <= o <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append("\\ufffd")
        elif c in "\u2028\u2029":
            out.append(f"\\u{o:04x}")
        else:
            out.append(c)
    return "".join(out) + '"'


class _Capture:
    """One capturing process: its clock, identity and stdout/stderr rule."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = _BASE_NS + seed * _SEED_STEP_NS
        self.pid = 12345 + 1009 * seed
        self.host = f"gpu-node-{3 + seed % 5}"
        self.ip = f"10.0.0.{5 + seed % 200}"
        self.task = seed % 4  # srun task id and MPI rank
        self.label_width = 1 + seed % 2  # srun pads to the digits of the task count
        self.in_traceback = False

    def tick(self) -> int:
        t = self.now
        self.now += self.rng.randrange(1_000_000, 50_000_000)
        return t

    def stream(self, line: str) -> str:
        """stderr for tracebacks and ERROR/CRITICAL/FATAL lines, stdout otherwise."""
        body = line[m.end():] if (m := _PROC_PREFIX.match(line)) else line
        if _TB_START.match(body):
            self.in_traceback = True
        elif self.in_traceback and body[:1] not in ("", " ", "\t"):
            self.in_traceback = False  # the exception line ends the traceback
            return "stderr"
        if self.in_traceback or _ERROR_WORD.search(body[:80]):
            return "stderr"
        return "stdout"


def _docker_json(cap: _Capture, lines: list[str], open_last: bool) -> list[str]:
    out = []
    for i, line in enumerate(lines):
        stream, pieces = cap.stream(line), _chunks(line, _DOCKER_CHUNK, True)
        for j, piece in enumerate(pieces):
            end = "\n" if j == len(pieces) - 1 and not (open_last and i == len(lines) - 1) else ""
            out.append(f'{{"log":{_go_json(piece + end)},"stream":"{stream}",'
                       f'"time":"{_iso(cap.tick(), None)}"}}')
    return out


def _cri_pieces(cap: _Capture, lines: list[str], open_last: bool):
    """(stream, [(time, tag, piece)]) per line as containerd writes them."""
    for i, line in enumerate(lines):
        is_open = open_last and i == len(lines) - 1
        if not is_open and line.endswith("\r"):
            line = line[:-1]  # containerd's readLine drops the \r of \r\n
        stream, pieces = cap.stream(line), _chunks(line, _CRI_MAX_LINE, False)
        tags = ["P"] * (len(pieces) - 1) + ["P" if is_open else "F"]
        yield stream, [(cap.tick(), tag, piece) for tag, piece in zip(tags, pieces)]


def _cri(cap: _Capture, lines: list[str], open_last: bool) -> list[str]:
    return [f"{_iso(t, None)} {stream} {tag} {piece}"
            for stream, records in _cri_pieces(cap, lines, open_last) for t, tag, piece in records]


def _kubectl(cap: _Capture, lines: list[str], open_last: bool) -> list[str]:
    # the kubelet prefixes every CRI record, partials included, and adds no newline to a P
    return ["".join(f"{_iso(t, 9)} {piece}" for t, _, piece in records)
            for _, records in _cri_pieces(cap, lines, open_last)]


def _journald(cap: _Capture, lines: list[str], open_last: bool) -> list[str]:
    out = []
    for line in lines:
        # journalctl without -a: TAB -> 8 spaces, colour/OSC sequences and trailing \r dropped
        message = _SGR.sub("", line.replace("\t", " " * 8)).rstrip("\r")
        for piece in _chunks(message, _JOURNALD_LINE_MAX, False):
            out.append(f"{_bsd(cap.tick(), '0')} {cap.host} vllm[{cap.pid}]: {piece}")
    return out


def _pri(cap: _Capture, line: str) -> int:
    return 11 if cap.stream(line) == "stderr" else 14  # user.err / user.info, like dockerd


def _ansi(cap: _Capture, line: str) -> str:
    stream, prefix = cap.stream(line), ""
    if m := _PROC_PREFIX.match(line):  # vLLM's own worker prefix: CYAN ... RESET
        prefix, line = f"\x1b[1;36m{m.group()[:-1]}\x1b[0;0m ", line[m.end():]
    if v := _VLLM_HEAD.match(line):  # vLLM ColoredFormatter: level coloured, time/file grey
        level, stamp, where = v.groups()
        return (f"{prefix}\x1b[{_LEVEL_COLOUR[level]}m{level}\x1b[0m \x1b[90m{stamp}\x1b[0m "
                f"\x1b[90m{where}\x1b[0m{line[v.end():]}")
    w = _LEVEL_WORD.search(line)
    if w and w.start() < 40:  # colorlog style: coloured level, reset at the end of the record
        colour = _LEVEL_COLOUR[w.group()]
        return f"{prefix}{line[:w.start()]}\x1b[{colour}m{w.group()}\x1b[0m{line[w.end():]}\x1b[0m"
    if stream == "stderr" and line:
        return f"{prefix}\x1b[31m{line}\x1b[0m"
    return prefix + line


def _wrap(width: int):
    """A copy from a terminal `width` columns wide: what it showed (no colour codes, a
    redrawn progress bar as its last state), cut every `width` characters."""
    def shape(cap: _Capture, lines: list[str], open_last: bool) -> list[str]:
        shown = [_shown(line) for line in lines]
        return [line[i:i + width] for line in shown for i in range(0, len(line) or 1, width)]
    return shape


def _shown(line: str) -> str:
    """What a terminal showed of a line. Colour codes whose ESC a paste dropped count as
    the codes they were: the wrapped copy of a pasted log is the coloured log's copy."""
    line = _SGR.sub("", line)
    if "[0" in line and not any(escaped in line for escaped in ESCAPED_ESC):  # ESC as text shows
        line = LOST_ESC.sub("", line)
    if "\r" in line:
        parts = [part for part in line.split("\r") if part]
        line = parts[-1] if parts else ""
    return line


def _per_line(fmt):
    return lambda cap, lines, open_last: [fmt(cap, line) for line in lines]


_SHAPERS = {
    "compose": _per_line(lambda cap, line: f"{'vllm-1':<7} | {line}"),
    "docker-json": _docker_json,
    "cri": _cri,
    "kubectl-timestamps": _kubectl,
    "journald": _journald,
    "syslog-5424": _per_line(lambda cap, line: f"<{_pri(cap, line)}>1 {_iso(cap.tick(), 6)} "
                                               f"{cap.host} vllm {cap.pid} - - {line}"),
    "syslog-3164": _per_line(lambda cap, line: f"<{_pri(cap, line)}>{_bsd(cap.tick(), ' ')} "
                                               f"{cap.host} vllm[{cap.pid}]: {line}"),
    "srun": _per_line(lambda cap, line: f"{cap.task:0{cap.label_width}d}: {line}"),
    "mpirun": _per_line(lambda cap, line: f"[1,{cap.task}]<{cap.stream(line)}>:{line}"),
    # Ray's log monitor forwards every line of a remote actor, an engine's own process
    # labels and all (Ray Serve LLM: "(ServeReplica:... pid=1, ip=...) (EngineCore_DP0 pid=2) ...")
    # (a line Ray already forwarded, from another actor, keeps its own label)
    "ray": _per_line(lambda cap, line: line if _RAY_PREFIX.match(line)
                     else f"(RayWorkerWrapper pid={cap.pid}, ip={cap.ip}) {line}"),
    # quoted in a markdown reply (GitHub's "Quote reply", forums): an empty line is a bare '>'
    "quote": _per_line(lambda cap, line: f"> {line}" if line else ">"),
    # pasted as a markdown code block by indentation (four spaces), or indented in a ticket or a mail
    "indented": _per_line(lambda cap, line: f"    {line}" if line else line),
    "ansi": _per_line(_ansi),
    # the same colours pasted into a bug report or a web page, which drop the invisible ESC byte
    "ansi-pasted": _per_line(lambda cap, line: _ansi(cap, line).replace("\x1b", "")),
    "crlf": lambda cap, lines, open_last: [
        line if line.endswith("\r") or (open_last and i == len(lines) - 1) else line + "\r"
        for i, line in enumerate(lines)],
    "wrap-80": _wrap(80),
    "wrap-120": _wrap(120),
}
assert tuple(_SHAPERS) == SHAPES


def recapture(data: bytes, shape: str, seed: int = 0) -> bytes:
    """`data` as the capture layer `shape` would have stored or printed it."""
    if shape not in _SHAPERS:
        raise ValueError(f"unknown capture shape {shape!r}; known: {', '.join(SHAPES)}")
    if not data:
        return b""
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    open_last = lines[-1] != ""
    if not open_last:
        lines.pop()
    out = _SHAPERS[shape](_Capture(seed), lines, open_last)
    return ("\n".join(out) + ("" if open_last else "\n")).encode("utf-8", "surrogateescape")
