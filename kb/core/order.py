"""The order a log's lines were captured in. A log viewer (Grafana's Loki, Kibana, a cloud
console) lists the newest line first, and a copy from it reads bottom to top: each
traceback's exception line above its frames and its header below them. Read as given,
the cause is a cascade's first line and the frames belong to nothing. The head decides,
by structure only: a Python traceback printed in reverse, or timestamps that run
backwards. Either test keeps quiet rather than guess: a log in the usual order never
shows a whole traceback upside down, and its timestamps go forward."""

from __future__ import annotations

from kb.core import patterns as P
from kb.core.capture import Profile, peel
from kb.core.context import parse_time
from kb.core.split import parse_line

ORDER_LINES = 120  # the head's lines that decide (a reversed copy opens with its crash)
MAX_FRAMES_WALKED = 60  # lines above a traceback's header searched for its exception line
BACKWARD_STEPS = 8  # timestamps that go back at least this often ...
FORWARD_SHARE = 0.1  # ... and forward at most this share as often: a reversed copy


def newest_first(lines: list[str], profile: Profile) -> bool:
    """Do the head's `lines` (as captured, `profile` learned from them) run newest first?

    Timestamps decide where they show the order: a reversed copy's go back at almost every
    step where they change (the capture's stamps, else the program's: a program may stamp
    whole seconds). Without them, tracebacks do: one in the usual order has its header
    right above a frame; one reversed has frames (and code) right above its header and
    its exception line above them. Each process's lines are read apart (two workers'
    tracebacks interleave); any traceback in the usual order says no."""
    peeled = [peel(line, profile) for line in lines[:ORDER_LINES]]
    parsed = [parse_line(number, line, profile) for number, line in enumerate(peeled, 1)]
    captured = [line.timestamp for line in peeled]
    stamps = captured if sum(1 for t in captured if t) > BACKWARD_STEPS else [line.timestamp for line in parsed]
    times = [moment for stamp in stamps if stamp and (moment := parse_time(stamp))]
    backward = sum(later < earlier for earlier, later in zip(times, times[1:]))
    forward = sum(later > earlier for earlier, later in zip(times, times[1:]))
    if backward >= BACKWARD_STEPS and forward <= FORWARD_SHARE * backward:
        return True
    if forward >= BACKWARD_STEPS and backward <= FORWARD_SHARE * forward:
        return False
    streams: dict[object, list[str]] = {}
    for line in parsed:
        streams.setdefault(line.key, []).append(line.body.strip())
    upside_down = 0
    for texts in streams.values():
        for index, text in enumerate(texts):
            if not P.TRACEBACK_START.search(text):
                continue
            if P.FRAME.match(next((t for t in texts[index + 1:] if t), "")):
                return False  # a traceback as Python prints it
            upside_down += _exception_above_frames(texts, index)
    return upside_down > 0


def _exception_above_frames(texts: list[str], header: int) -> bool:
    """Above the header at `texts[header]`: frames and their code lines, at least one
    frame, then an exception line (a reversed traceback, bottom to top)."""
    frames = 0
    for text in reversed(texts[max(header - MAX_FRAMES_WALKED, 0):header]):
        if P.FRAME.match(text):
            frames += 1
        elif P.EXCEPTION_LINE.match(text):
            return frames > 0
        elif not text:
            return False
    return False
