"""Versioned crash fingerprint with a hint for every part, so a person can see why two
crashes were grouped. Never change the algorithm in place: bump VERSION."""

from __future__ import annotations

import hashlib
import re

from kb.core import lazyre
from kb.core.normalize import frame_key, library_path, message_template, relevant
from kb.core.patterns import WINDOWS_SIGNALS
from kb.core.records import ErrorEvent, Fingerprint, Hint

VERSION = "4"  # 2: engine and crash phase join the hash; 3: "EAGLE-3" keeps its number; 3.1: detection v2 (capture layer, error grammar, kind names, phase evidence) changes what is hashed; 4: the error alone (engine and phase leave the hash: a wrong phase guess must not split a group)
FRAMES_KEPT = 6  # in-library frames nearest the raise
HASHED_FRAMES = 3  # of those, the ones in the hash: where the error is raised, not the caller's path


def canonical_exception(name: str) -> str:
    """'torch.cuda.OutOfMemoryError' and 'torch.OutOfMemoryError' are one type that moved;
    C++ namespaces likewise ('tensorrt_llm::common::TllmException' is TllmException)."""
    if not name:
        return ""
    base = name.split("(")[0]
    if "::" in base and " " not in base:
        base = base.rsplit("::", 1)[-1]
    return base.rsplit(".", 1)[-1] if "." in base else base


_KILLED = lazyre.compile(r"\bsignal (SIG[A-Z]+)|\bexit ?code:? -(\d+)|Signal (\d+) \(|\b(SIGKILL|SIGSEGV|SIGABRT|SIGBUS)\b", re.I)
_SIGNAL_NAMES = {"9": "SIGKILL", "11": "SIGSEGV", "6": "SIGABRT", "7": "SIGBUS", "15": "SIGTERM"}
# Signals a process raises on itself where it crashed: a segfault in NCCL set-up and one
# in a tokenizer share the signal and nothing else, so the signal alone identifies
# nothing. (SIGKILL/SIGTERM come from outside, the OOM killer or a scheduler, and SIGILL
# from a CPU without the instruction set: there the signal is the cause's identity.)
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGFPE", "SIGABRT"})


def killed_by(event: ErrorEvent) -> str | None:
    """A process killed by a signal has no identity but the signal: torchrun's exit code
    -9, multiprocessing's 'terminated with signal SIGKILL' and a bare SIGKILL are one crash."""
    if event.kind == "signal" and event.exception.startswith("SIG"):
        return event.exception
    if event.kind == "signal" and event.exception in WINDOWS_SIGNALS:
        # a Windows process dies of a native exception where a POSIX one gets a signal: the
        # same fault, so the same identity (an access violation in ggml's loader and one in
        # MLX's init share their exception code and nothing else)
        return WINDOWS_SIGNALS[event.exception]
    match = _KILLED.search(f"{event.exception} {event.message}")
    if not match:
        return None
    name = match.group(1) or match.group(4)
    if name:
        return name.upper()
    number = match.group(2) or match.group(3)
    return _SIGNAL_NAMES.get(number)


# KeyError's repr of the key, an index: nothing but the value (after normalization); a
# sentence in quotes (a logger's quoted message) is no value
VALUE_ONLY = lazyre.compile(r"""^\s*(?:'[^'\s]*'|"[^"\s]*"|<[a-z]+>|-?\d+)\s*$""")

# CUDA's asynchronous faults: a kernel failed, reported at whatever call synchronized next
_DEVICE_FAULT = lazyre.compile(r"\b(?:an illegal memory access was encountered|misaligned address|unspecified launch failure"
                           r"|an illegal instruction was encountered|device-side assert triggered"
                           r"|Memory access fault by GPU)\b", re.I)  # (ROCm's HSA runtime: the same, on AMD)
# A kernel that asked for more than the GPU has (Triton's shared memory or registers, a
# launch's resources): each kernel asks for its own, so which kernel is the crash
_KERNEL_LIMIT = lazyre.compile(r"\bout of resource: \w+|too many resources requested for launch", re.I)


def names_no_kernel(template: str) -> bool:
    """A kernel's fault or limit: like a crash signal's, its text says nothing of which
    kernel, so where it surfaced is its identity."""
    return bool(_DEVICE_FAULT.search(template) or _KERNEL_LIMIT.search(template))


def fingerprint(event: ErrorEvent | None) -> Fingerprint:
    """The identity of the error alone: kind, message template and, when the message is
    too short to tell causes apart, the frames nearest the raise. Where it happened
    (engine, version, phase) is context: the matcher weighs it, the hash does not."""
    if event is None:
        return Fingerprint(version=VERSION, hash=_digest("no-error"), signature="(no error found)",
                           exception="", message_template="",
                           hints=[Hint("exception", "", False, "no error found in the log")])
    hints: list[Hint] = []
    # a long message that names a signal is about something else; a signal's own report
    # may be long (the shell's job report ends with the whole command line)
    signal = killed_by(event) if event.kind in ("signal", "oom_kill") or len(event.message) < 300 else None
    if signal:
        exception, template = signal, f"process killed by {signal}"
        frames = _contributing_frames(event, hints) if signal in CRASH_SIGNALS else []
        weak = signal in CRASH_SIGNALS and not frames
        hints.insert(0, Hint("exception", f"{event.exception}: {event.message}", True,
                             f"a crash by {signal}: where it crashed is the identity"
                             + (", and the log does not show it" if weak else "")
                             if signal in CRASH_SIGNALS else
                             f"a process killed by {signal}: the signal is the identity, the wording is not"))
        return _fingerprint(exception, template, frames, hints, weak=weak)
    exception = canonical_exception(event.exception)
    if exception != event.exception:
        hints.append(Hint("exception", event.exception, True, f"module path dropped: compared as {exception}"))
    else:
        hints.append(Hint("exception", exception, True, "exception type"))
    template = message_template(event.message)
    if template != event.message.strip():
        hints.append(Hint("message", template, True, "paths, numbers, sizes, addresses, ranks and GPU indices replaced"))
    else:
        hints.append(Hint("message", template, True, "message as printed"))

    frames = _contributing_frames(event, hints) or _named_site(event.message, hints)
    # a type alone ("RuntimeError", its message and frames cut from the excerpt) says which
    # of a thousand crashes? None; nor do frames alone (a traceback cut before its
    # exception line shows where the process was, often its entry point, not what
    # failed): never an exact route, never "known"
    type_alone = not template and not frames
    frames_alone = not template and not exception
    # a device fault or a kernel over its limits names no kernel: as for a crash signal,
    # where it surfaced is the identity, and a log without frames does not show it
    site_unknown = not frames and names_no_kernel(template)
    # ... and so does a message that is only a value (a KeyError's key, its names replaced):
    # which lookup failed is where it was raised
    value_alone = not frames and bool(VALUE_ONLY.match(template))
    if type_alone:
        hints.append(Hint("message", "", False, "no message and no frames: the type alone identifies nothing"))
    elif frames_alone:
        hints.append(Hint("message", "", False, "no exception and no message: the frames alone identify nothing"))
    elif site_unknown:
        hints.append(Hint("frames", "", False, "a kernel's fault or limit, and the log does not show where it surfaced"))
    elif value_alone:
        hints.append(Hint("frames", "", False, "a message that is only a value, and the log does not show where it was raised"))
    return _fingerprint(exception, template, frames, hints, weak=type_alone or frames_alone or site_unknown or value_alone)


# A source location an error's text names: "(/src/tllmBuffers.h:118)", "memory_utils.cu:32",
# "kernels/apply_token_bitmask_inplace_cuda.cu(212)"
_NATIVE_LOCATION = lazyre.compile(r"(?<![\w.])(?P<path>(?:[A-Za-z]:)?[\w./\\-]*?(?P<file>[\w-]+\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp)))[:(]\d+\b")
# The API a CUDA check names as what failed: "CUDA runtime error in ::cudaMallocAsync(ptr, n)"
_FAILED_CALL = lazyre.compile(r"\b(?:error|failed) in (?:::)?(?P<call>[A-Za-z_]\w*)\(")


# C code names the function that reports a failure first ("%s: ", __func__), as ggml and
# llama.cpp do: "ggml_backend_cuda_buffer_type_alloc_buffer: allocating ... failed"
_REPORTING_FUNCTION = lazyre.compile(r"(?P<func>[a-z][a-z0-9]*(?:_[a-z0-9]+){2,}): ")


def _named_site(message: str, hints: list[Hint]) -> list[str]:
    """A crash without frames whose text names the native source line it failed at (a
    CUDA check, a C++ assertion, a Python exception carrying one): that location, with
    the API it says failed there, is its crash site, as frames are a Python error's. The
    file's name only: its path moves between builds and source layouts. Else the C
    function that opens the text to report it, when one does."""
    location = None
    for location in _NATIVE_LOCATION.finditer(message[:2000]):
        pass
    if location is not None:
        call = _FAILED_CALL.search(message[:2000])
        key, why = f"{location['file']}:{call['call'] if call else '?'}", "the native source location the message names"
    elif reporter := _REPORTING_FUNCTION.match(message):
        key, why = f"<native>:{reporter['func']}", "the C function that reports the error (`%s: ` of __func__)"
    else:
        return []
    hints.append(Hint("frame", key, True, f"{why}: its crash site"))
    return [key]


def _contributing_frames(event: ErrorEvent, hints: list[Hint]) -> list[str]:
    """The frames that say where: library-relative, plumbing dropped, the FRAMES_KEPT
    nearest the raise (most recent last), each decision noted in `hints`."""
    frames: list[str] = []
    for frame in reversed(event.frames):  # nearest the raise first
        key = frame_key(frame)
        rule = relevant(key)
        if rule is not None:
            hints.append(Hint("frame", key, False, f"{rule.name}: {rule.why}"))
            continue
        if len(frames) >= FRAMES_KEPT:
            hints.append(Hint("frame", key, False, f"beyond the {FRAMES_KEPT} frames nearest the raise"))
            continue
        frames.append(key)
        dropped = []
        if frame.line is not None:
            dropped.append("line number dropped")
        if library_path(frame.file) != frame.file:
            dropped.append("install prefix removed")
        hints.append(Hint("frame", key, True, ", ".join(dropped) or "frame"))
    frames.reverse()
    return frames


def _fingerprint(exception: str, template: str, frames: list[str], hints: list[Hint],
                 weak: bool = False) -> Fingerprint:
    parts = [VERSION, exception, template, *frames[-HASHED_FRAMES:]]
    if frames:
        hints.append(Hint("frame", " < ".join(frames[-HASHED_FRAMES:]), True,
                          f"the {HASHED_FRAMES} contributing frames nearest the raise join the hash"))
    signature = ": ".join(part for part in (exception, template) if part)
    if frames:
        signature += " | " + " < ".join(f.rsplit(":", 1)[-1] for f in reversed(frames[-3:]))
    return Fingerprint(version=VERSION, hash=_digest("\x1f".join(parts)), signature=signature[:400],
                       exception=exception, message_template=template, frames=frames, hints=hints,
                       weak=weak)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]
