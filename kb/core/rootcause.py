"""Choose the error a person must fix; set the wrappers and consequences aside, and say why.

1. Collapse errors every rank repeats into one occurrence group (first occurrence kept,
   ranks listed), like NVIDIA's attribution does.
2. Give each group a role from the tables: symptom (a wrapper that points elsewhere),
   cascade (NCCL, peers gone: look for an earlier trigger), confirmation (signal/OOM kill),
   benign (recovered warnings, teardown noise), root; deprecation notices are noise and
   never chosen.
3. Rank: roots with a traceback first; within a tier the earliest wins, because what
   happens first is what made the others happen. An error its process went on from
   (INFO lines after it, a later error ending the run) is demoted as recovered.
4. A native crash (segfault, abort) earlier than the best candidate wins: the process
   died there and the rest is fallout. An error that only relays a library's result code
   gives way to what the library logged before it (NCCL's WARN lines, NIXL's ERROR lines).
5. In `raise X from e` chains the cause is the root, unless X diagnoses it (says what it
   means rather than repeating it): then X is what a person fixes. The same holds for an
   error raised while handling another in the function that caught it (a translation).

Score terms (one table: _BASE per tier, then _score's adjustments) and confidence (the
tier's, lowered by a close runner-up: _confidence) are documented where they are set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kb.core import lazyre, patterns as P
from kb.core import scan
from kb.core.normalize import library_path, message_template
from kb.core.records import LOGGED_ERROR, ErrorEvent, Frame
from kb.core.tracebacks import Found

# Base score per (role, how it was found). Higher is likelier the cause.
_BASE = {
    "root-traceback": 100,
    "root-line": 90,
    "root-rule": 88,
    "root-inferred": 70,
    "cascade": 60,
    "confirmation": 50,
    "log_error": 40,
    "truncated": 30,
    "symptom": 20,
    "benign": 1,
    "noise": 0,  # never chosen: dropped before ranking
}
_CONFIDENCE = {
    "root-traceback": 0.95, "root-line": 0.9, "root-rule": 0.88, "root-inferred": 0.6, "confirmation": 0.75,
    "cascade": 0.6, "log_error": 0.45, "truncated": 0.35, "symptom": 0.3, "benign": 0.1,
}
_BAD_CHAIN_START = {"StopIteration", "CancelledError", "Empty", "TimeoutError", "KeyboardInterrupt"}
# Errors of the handling code itself: raised while handling another error, they say
# nothing about it (a catch-all writing the traceback to a `sys.stderr` that is None
# raises AttributeError), so they are never that error's diagnosis.
_HANDLER_BUGS = {"AttributeError", "TypeError", "NameError", "UnboundLocalError", "KeyError", "IndexError"}


@dataclass(slots=True)
class Group:
    first: Found
    tier: str
    reason: str
    ranks: list[str]
    count: int
    recovered: bool = False
    last_line: int = 0  # where the group's last member was printed (a repeat ends later)
    resumed: int = 0  # the first INFO record of that member's stream after it (0: none)


def choose(found: list[Found], benign: bool = True,
           unloaded: Sequence[tuple[Found, str]] = ()) -> tuple[ErrorEvent | None, list[ErrorEvent]]:
    """Return (root cause, symptoms set aside) from everything found in the log;
    `unloaded`: the lines saying a component could not be loaded, each with its name.
    A process that went on logging normally (an INFO record) after an error, before a
    later error ended the run, recovered from the first one. `benign=False`: a benign
    error (recovered, teardown) is never the answer, not even the only one."""
    groups = [g for g in _group(_without_copies(found)) if g.tier != "noise" and (benign or g.tier != "benign")]
    if not groups:
        return None, []
    _mark_propagated(groups)
    _mark_relayed(groups)
    _mark_exit_reports(groups)
    _mark_recovered(groups)
    scores = {id(g): _score(g) for g in groups}
    ranked = sorted(groups, key=lambda g: (-scores[id(g)], g.first.event.line_number or 0))
    best = ranked[0]
    native = [g for g in groups if g.first.event.kind == "signal" and g.tier == "root-rule"
              and (g.first.event.line_number or 0) < (best.first.event.line_number or 0)]
    if native:
        best = native[0]  # a native crash kills its process first: what follows is fallout
    asserted = [g for g in groups if _kernel_assert(g.first.event) and g.tier == "root-rule"
                and (g.first.event.line_number or 0) < (best.first.event.line_number or 0)]
    if asserted and _CUDA_ERROR.search(f"{best.first.event.exception}: {best.first.event.message}"):
        # a kernel that failed its own assertion traps: the host learns of it as the next
        # CUDA error ("device-side assert triggered", "unspecified launch failure")
        best = asserted[0]
    best = _task_result(best, groups) or best
    if _is_crash(best.first.event):
        # ... and a crash after a native library or a GPU runtime reported its own failure
        # (llama.cpp's "error loading model", then ctypes' access violation on the null model;
        # a HIP error, then the abort) is that failure's fallout; the abort after an uncaught
        # C++ exception is what std::terminate does
        aborted = best.first.event.exception == "SIGABRT"
        reported = [g for g in groups if g.first.key == best.first.key and _line(g) < _line(best)
                    and (g.first.event.kind in ("native", "cpp", "cuda")
                         and (g.tier == "root-rule" or aborted and g.first.event.kind == "cpp" and g.tier != "benign"
                              and not g.recovered)
                         or aborted and _fatal_record_before(g, best, groups))]
        if reported:
            best = reported[0]
    stated = _stated_by_library(best, groups) or _introduced_below(best, groups)
    if stated is not None:
        best = stated
    killed = [g for g in groups if _shell_killed(g.first.event) and g.first.event.process == best.first.event.process
              and (g.first.event.line_number or 0) < (best.first.event.line_number or 0)]
    if killed:
        # The shell reports its foreground job killed (the OOM killer's SIGKILL): the job
        # printed nothing more, so a later error of that stream is the next step failing
        # without the killed one's output ("Killed", then FileNotFoundError: its result).
        best = killed[0]
    missing = _unloaded_component(best, unloaded)
    if missing is not None:
        groups.append(missing)
        scores[id(missing)] = _score(missing)
        best = missing
    if best.first.event.kind == "cpp":
        # An uncaught C++ error after a wrapper of its stream already quoted the failure
        # (vLLM's "Worker failed with error '...'", then c10's "Trying to free a pointer not
        # allocated here" as the process exits): the process tearing down; the quote is the cause
        quoted = _first_quoted(ranked, before=best)
        if quoted is not None:
            return quoted, _set_aside(ranked)
    if best.tier in ("truncated", "log_error"):
        # A traceback cut before its exception line, and a wrapper quoting an error: the
        # quote is what the log kept of that exception (vLLM's "Worker failed with error '...'");
        # a typed quote also says more than a logger's ERROR line
        quoted = _first_quoted(ranked)
        if quoted is not None and (best.tier == "truncated" or quoted.kind != "log_error"):
            return quoted, _set_aside(ranked)
    if best.tier == "truncated" and not best.first.event.exception:
        # A traceback cut before its exception line, begun after a wrapper's whole one in
        # the same stream, is that error printed again (vLLM logs it, then its process's
        # own top level prints it): it adds nothing to what the wrapper says.
        line = best.first.event.line_number or 0
        printed = [g for g in groups if g.tier == "symptom" and g.first.key == best.first.key
                   and g.first.event.kind == "python" and (g.first.event.line_number or 0) < line]
        if printed:
            best = printed[-1]
    if best.tier == "symptom" and best is not stated:
        # A typed exception set aside only by its chain (not a known wrapper) still names a cause.
        typed = next((g for g in ranked if g.first.event.kind == "python" and g.tier != "benign"
                      and g.first.event.message.strip()
                      and not scan.first_rule(P.SYMPTOMS, f"{g.first.event.exception}: {g.first.event.message}")),
                     None)
        if typed is not None:
            best = typed
        else:
            return _only_wrappers(best, ranked)
    root = _as_event(best)
    root.role = "root"
    root.confidence = _confidence(best, ranked, scores)
    if best.tier not in ("root-traceback", "root-line", "root-rule") and best is not stated:
        root.reason = f"{best.reason}; chosen because no stronger candidate was found"
    symptoms = [_as_event(g) for g in groups if g is not best and g.tier != "benign"]
    symptoms.sort(key=lambda e: e.line_number or 0)
    return root, symptoms


def _task_result(best: Group, groups: list[Group]) -> Group | None:
    """asyncio reports a failed task nobody awaited ("Task exception was never retrieved /
    future: <Task finished ... exception=RuntimeError('Triton Error [CUDA]: invalid
    argument')>", or the exception's str() alone when it prints no repr), then the task's
    traceback. The report names the exception that traceback ends with; a traceback
    printed next that ends with another one shows the start of its chain (a KeyError the
    code handled), cut before "During handling": the named one is the error."""
    event = best.first.event
    if best.tier != "root-traceback":
        return None
    line = event.line_number or 0
    told = max((g for g in groups if g.first.task_result and g.first.key == best.first.key
                and (g.first.event.line_number or 0) < line), key=lambda g: g.first.event.line_number or 0, default=None)
    if told is None or any(g is not best and (told.first.event.line_number or 0) < (g.first.event.line_number or 0) < line
                           for g in groups):
        return None  # not the traceback printed right after the report
    said = told.first.event
    if said.exception.rpartition(".")[2] == event.exception.rpartition(".")[2] or said.message == event.message:
        return None  # the traceback ends with the error the report names: it has the frames
    return told


def _line(group: Group) -> int:
    return group.first.event.line_number or 0


def _fatal_record_before(record: Group, abort: Group, groups: list[Group]) -> bool:
    """A program aborts right after logging its fatal error at the fatal level (LOG(FATAL),
    logcat's assert level): that record, the last thing its stream said, is what failed."""
    return (record.tier == "log_error" and record.first.level == "CRITICAL" and not record.recovered
            and _line(abort) - _line(record) <= _ABORT_AFTER_LOG
            and not any(_line(record) < _line(other) < _line(abort) for other in groups if other.first.key == abort.first.key))


_ABORT_AFTER_LOG = 10  # lines from a fatal record (a terminal may wrap it) to the abort it ends in
_CUDA_ERROR = lazyre.compile(r"CUDA error|cudaError|CUDA_ERROR|launch failure")
_CU_SOURCE = lazyre.compile(r"\.cuh?:\d+")


def _kernel_assert(event: ErrorEvent) -> bool:
    """An assertion a GPU kernel failed: torch's device-side assert, or a library's assert
    macro printed from a .cu source (DeepEP's EP_DEVICE_ASSERT)."""
    return event.exception == "CUDA device-side assert" or (
        event.exception == "Assertion failed" and bool(_CU_SOURCE.search(event.message)))


_SHELL_JOB_SIGNAL = next(rule for rule in P.ERROR_LINES if rule.name == "shell-job-signal")
# Windows reports a native crash to Python's ctypes as this OSError (SIGSEGV elsewhere)
_ACCESS_VIOLATION = lazyre.compile(r"^exception: access violation\b")


def _unloaded_component(best: Group, unloaded: Sequence[tuple[Found, str]]) -> Group | None:
    """An error that needs a component the log said earlier could not be imported or
    loaded ("NotImplementedError: Sharded Llama requires Flash Attention enabled models"
    after "Could not import Flash Attention enabled models: GPU with CUDA capability 7 0
    is not supported"): the engine went on without it, and that line says why it is
    missing. The error must name the component; None when no such line does."""
    event = best.first.event
    if not unloaded or not best.tier.startswith("root") or not event.message:
        return None
    line, message = event.line_number or 0, event.message.lower()
    for item, what in unloaded:
        name = what.lower()
        if (item.event.line_number or 0) < line and len(name) >= 4 and re.search(
                rf"(?<!\w){re.escape(name)}(?!\w)", message):
            reason = f"{event.exception or 'the error'} needs {what}, which this line says could not be loaded"
            return Group(item, "root-line", reason, [], 1)
    return None


# An error that gives only a library's result code (`nixlBackendError: NIXL_ERR_BACKEND`)
_RESULT_CODE = lazyre.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_STATEMENT_KINDS = frozenset({"log_error", "native", "cpp", "ucx"})
_STATEMENT_LINES = 60  # how far above the code the library's own statement may be


def _stated_by_library(best: Group, groups: list[Group]) -> Group | None:
    """An error that only relays a library's result code points at the library's own log
    for what failed, and what the library logged just before it there says it: NCCL's
    "unhandled system error (run with NCCL_DEBUG=INFO for details)" after its `NCCL WARN`
    lines (printed without the process's prefix), an exception whose message is a code
    (`NIXL_ERR_BACKEND`) after the library's ERROR lines of the same process. The first
    such statement, an error before a warning; None when the log holds none. A relayed
    NCCL result whose copy was cut takes the one another rank printed whole before it."""
    event = best.first.event
    line = event.line_number or 0
    if best.tier == "cascade" and ("NCCL_DEBUG=INFO for details" in event.message
                                   or event.message.lstrip().startswith("NCCL error")):
        warned = next((g for g in groups if g.first.event.kind == "nccl" and g.tier == "cascade"
                       and (g.first.event.line_number or 0) < line), None)
        if warned is not None:
            return warned
        # torch prints NCCL's result and its last error right under its own error
        # ("ncclSystemError: ... / Last error: / <what failed>"): that says what failed
        below = _next_of_stream(best, groups, line)
        if below is not None and P.NCCL_RESULT.match(below.first.event.exception) and "Last error:" in below.first.event.message:
            if not below.first.event.frames:  # the same exception's text goes on: its frames
                below.first.event.frames = event.frames
            return below
        if "Last error:" in event.message:
            return None
        # ... and another rank printed it whole earlier, where this one's copy was cut
        # before it (interleaved ranks, an excerpt that ends inside the text)
        return next((g for g in groups if g is not best and P.NCCL_RESULT.match(g.first.event.exception)
                     and "Last error:" in g.first.event.message and (g.first.event.line_number or 0) < line), None)
    if best.tier.startswith("root") and _RESULT_CODE.fullmatch(event.message.strip()):
        stated = [g for g in groups if g.first.event.kind in _STATEMENT_KINDS and g is not best
                  and g.first.event.process == event.process and not g.recovered
                  and line - _STATEMENT_LINES <= (g.first.event.line_number or 0) < line]
        # a statement of failure outranks a warning the library printed before it
        return min(stated, key=lambda g: (_is_warning(g.first), g.first.event.line_number or 0), default=None)
    return None


_INTRODUCED_WITHIN = 3  # lines below the introduction (a terminal's cut may split it)
_INTRODUCES = lazyre.compile(r"^[\w`'\" .-]{1,40}:$")  # "`ptxas` stderr:", "Last error:", "Output:"


def _introduced_below(best: Group, groups: list[Group]) -> Group | None:
    """An exception whose message ends by introducing another text ("... PTXAS error:
    Internal Triton PTX codegen error / `ptxas` stderr:") relays what the next line
    states in a format of its own (`ptxas fatal : Value 'sm_121a' is not defined ...`):
    the tool's own statement of what failed is the error, with the exception's frames.
    So is the exception a one-line message introduces (torch's "BackendCompilerFailed:
    backend='inductor' raised:" then "ImportError: cannot import name ..."): what the
    backend raised is what a person fixes."""
    event = best.first.event
    lines = event.message.rstrip().split("\n")
    # (or a one-line message that ends introducing it: ollama's "... runner process has terminated:")
    one_line = len(lines) == 1
    introduces = _INTRODUCES.match(lines[-1].strip()) if not one_line else lines[0].endswith(":")
    if not best.tier.startswith("root") or event.kind != "python" or not introduces:
        return None
    end = max(best.first.end_line, event.line_number or 0)
    stated = _next_of_stream(best, groups, end)
    # (what a one-line introduction introduces is what was raised, even an error that
    # otherwise only reports another's failure: a compiler's exit, the build's own words cut)
    if (stated is None or not (stated.tier.startswith("root") or one_line and stated.tier == "symptom")
            or stated.first.event.kind == "python" and not one_line
            or (stated.first.event.line_number or 0) - end > _INTRODUCED_WITHIN):
        return None  # the next error of its process is not the text right below it
    if not stated.first.event.frames:
        stated.first.event.frames = event.frames
    if not stated.tier.startswith("root"):
        stated.reason = f"what {event.exception.rpartition('.')[2]}'s \"{lines[-1].strip()[-60:]}\" introduces"
    return stated


def _next_of_stream(best: Group, groups: list[Group], line: int) -> Group | None:
    """The first error `best`'s stream printed after `line`, None when there is none (by
    stream, not by the process label an error names: xinference's text names its actor's
    address and pid, the lines below it do not)."""
    return min((g for g in groups if g is not best and g.first.key == best.first.key
                and (g.first.event.line_number or 0) > line),
               key=lambda g: g.first.event.line_number or 0, default=None)


def _is_warning(found: Found) -> bool:
    """Logged at warning level, or a warning by its own words (UCX's `WARN` line)."""
    return found.level == "WARNING" or found.event.exception.lower().endswith("warning")


def _is_crash(event: ErrorEvent) -> bool:
    """A native crash signal, or the access violation ctypes raises for one on Windows."""
    return event.kind == "signal" and event.role != "confirmation" or (
        event.exception.rpartition(".")[2] == "OSError" and bool(_ACCESS_VIOLATION.match(event.message)))


def _shell_killed(event: ErrorEvent) -> bool:
    """The shell's report that its foreground job was killed ("Killed")."""
    return event.exception == "SIGKILL" and bool(_SHELL_JOB_SIGNAL.pattern.search(event.message))


def _only_wrappers(best: Group, ranked: list[Group]) -> tuple[ErrorEvent, list[ErrorEvent]]:
    """Only wrappers were found. One that quotes its cause gives that cause; otherwise they
    point at an error the log does not hold, and the best wrapper is returned as a symptom
    (role "symptom", low confidence: the analysis says the cause was not captured)."""
    quoted = _first_quoted(ranked)
    if quoted is not None:
        return quoted, _set_aside(ranked)
    wrapper = _as_event(best)
    wrapper.role, wrapper.confidence = "symptom", 0.2
    wrapper.reason = f"{best.reason}; only wrappers were found: the cause was not captured in this log"
    return wrapper, sorted((_as_event(g) for g in ranked if g is not best), key=lambda e: e.line_number or 0)


def _first_quoted(ranked: list[Group], before: Group | None = None) -> ErrorEvent | None:
    """The first cause a wrapper quotes (with `before`: a wrapper of its stream printed before it)."""
    return next((q for g in ranked if g.tier == "symptom" and (before is None or g.first.key == before.first.key
                                                              and _line(g) < _line(before))
                 and (q := _quoted_cause(g)) is not None), None)


def _set_aside(ranked: list[Group]) -> list[ErrorEvent]:
    """Everything else found, in log order, benign noise left out (as the main path does)."""
    return sorted((_as_event(g) for g in ranked if g.tier != "benign"), key=lambda e: e.line_number or 0)


def _quoted_cause(wrapper: Group) -> ErrorEvent | None:
    """A wrapper that quotes its cause ("Worker failed with error 'CUDA error: an illegal
    memory access was encountered'"): the quoted error is what the log captured of it."""
    from kb.core.tracebacks import quoted_error

    event = wrapper.first.event
    found = quoted_error(event.message)
    if found is None or scan.first_rule(P.SYMPTOMS, f"{found.exception}: {found.message}"):
        return None  # (a quote that only reports another failure, a build's compiler run: no cause)
    found.process, found.line_number, found.ranks = event.process, event.line_number, list(wrapper.ranks)
    found.role, found.confidence = "root", 0.5
    found.reason = f"quoted by the wrapper {event.exception or 'line'}: {_first_line(event.message)}"
    return found


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:100]


def not_captured(symptoms: list[ErrorEvent]) -> str:
    """What to tell a person when only wrappers were found: which process died and
    where its own error would be."""
    processes = sorted({rank for event in symptoms for rank in (event.ranks or [event.process]) if rank})
    said = [e for e in symptoms if e.exception or e.message.strip()]  # not a traceback cut before its error
    wrappers = "; ".join(dict.fromkeys(f"{e.exception}: {_first_line(e.message)}".strip(": ") for e in said[:3]))
    where = f" (reported by {', '.join(processes[:4])})" if processes else ""
    return (f"the cause was not captured in this log: only wrappers were found{where}: {wrappers}. "
            "The failing process died without printing its error here: look at that worker's or rank's own "
            "output (its stderr, `kubectl logs --previous`, the launcher's per-rank log files), rerun with "
            "its logging on (torchrun --tee 3, VLLM_LOGGING_LEVEL=DEBUG, CUDA_LAUNCH_BLOCKING=1 for CUDA "
            "errors), and check the kernel log (`dmesg`) for an OOM kill.")


def unstated_error(line_number: int, text: str) -> str:
    """What to tell a person when the log shows an error happened but holds no statement
    of it (the excerpt starts after the exception line or ends before it)."""
    return (f"the cause was not captured in this log: line {line_number} shows an error was raised "
            f"({text}) but the exception line itself is not in this excerpt. Include the lines "
            "above and below it (the whole traceback, from its first line to the exception line).")


def native_stack_only(line_number: int, text: str) -> str:
    """What to tell a person when the log holds a native crash's stack but not the line
    above it that says what crashed (a signal, an abort, a C++ exception)."""
    return (f"the cause was not captured in this log: line {line_number} begins a native stack ({text}) "
            "but the line that says what crashed (the signal, abort or C++ exception printed above the "
            "stack) is not in this excerpt. Include the lines above it.")


def log_ends_early(phase: str, line_number: int, text: str) -> str:
    """What to tell a person when a launch's log holds no error at all: it was cut (or
    the process was killed) before the error was printed; say where it stops."""
    during = f" during {phase.replace('_', ' ')}" if phase != "unknown" else ""
    return (f"the cause was not captured in this log: it holds no error and ends{during} at line {line_number} "
            f"({text[:160]}). Include what the launch printed after that line (every process's and rank's "
            "output), and check the kernel log (`dmesg`) for an OOM kill if it stopped without a word.")


_COMPETING = {"root-traceback", "root-line", "root-rule", "root-inferred", "log_error", "truncated"}
_FULL_MARGIN = 40.0


def _confidence(best: Group, ranked: list[Group], scores: dict[int, float]) -> float:
    """The tier's confidence (_CONFIDENCE), lowered when another candidate for the cause
    scores close: x (0.75 + 0.25 * margin / 40), the margin over the best competing
    candidate capped at 40 (wrappers, cascades and confirmations point at the cause and
    do not compete with it)."""
    others = [scores[id(g)] for g in ranked if g is not best and g.tier in _COMPETING]
    margin = _FULL_MARGIN if not others else min(max(scores[id(best)] - max(others), 0.0), _FULL_MARGIN)
    return round(_CONFIDENCE[best.tier] * (0.75 + 0.25 * margin / _FULL_MARGIN), 3)


def _states_only_code(event: ErrorEvent) -> bool:
    """A message that is the failing statement (a bare assert's), not words of its own."""
    return bool(event.frames) and event.message == (event.frames[-1].code or None)


_PEER_GONE = next(rule for rule in P.CASCADES if rule.name == "peer-gone")
_WENT_ON = lazyre.compile(r"\b(?:falling|fall(?:s|en)?) back to\b|\bretrying\b", re.I)
_DEVICE_FAILURE = lazyre.compile(r"out of memory|[Cc]uda failure|CUDA error|illegal memory access")
_CONSTANT_ASSERT = lazyre.compile(r"(?:\((?:false|0)\) failed|: (?:false|0))\s*$")
_CODE_ONLY_FAILURE = lazyre.compile(r"\bfailed with (?:status|error|code)\s*[:=]?\s*-?\w+\.?\s*$")
# a logged error whose last word is how a process ended ('"llama runner terminated"
# error="exit status 2"'): a wrapper of what the runner printed, if anywhere
_EXIT_ONLY = lazyre.compile(r"\b(?:exit (?:status|code)|exited with (?:status|code))\s*[:=]?\s*-?\w+[\"']?\s*$")
_KIND_ONLY = lazyre.compile(r"[\w-]+(?: [\w-]+)? error", re.I)
_VALIDATION_COUNT = lazyre.compile(r"\d+ validation errors? for [\w.]+")
# Python's words for a None where an object was expected: what a creation that failed
# elsewhere leaves behind (a thread's model instance, a client never connected)
_NONE_USED = lazyre.compile(r"^'NoneType' object (?:has no attribute|is not (?:subscriptable|iterable|callable))")


def _score(group: Group) -> float:
    event = group.first.event
    score = _BASE[group.tier]
    if group.tier.startswith("root") and (event.message.strip() in ("", event.exception) or _states_only_code(event)
                                          or _KIND_ONLY.fullmatch(event.message.strip())
                                          or _VALIDATION_COUNT.fullmatch(event.message.strip())):
        # a bare `AssertionError`, ggml's abort line `ggml-cann.cpp:67: CANN error` (a kind
        # and nothing more) or pydantic's "1 validation error for ModelConfig" cut from its
        # details says less than the error printed beside it
        score -= 35
    elif group.tier == "cascade" and event.message.strip() in ("", event.exception):
        score -= 10  # a bare `EOFError` of a lost peer says less than a cascade that says what failed
    if group.tier.startswith("root") and event.exception == "GGML_ASSERT" and _CONSTANT_ASSERT.search(event.message):
        score -= 35  # GGML_ASSERT(false): an abort that states nothing; the line before it does
    elif group.tier.startswith("root") and _CODE_ONLY_FAILURE.search(event.message):
        score -= 10  # "... failed with status 5": a code, where the next line may say why
    if group.first.level == "WARNING" and group.tier != "confirmation":
        score -= 45  # (a process killed or signalled is final at whatever level its reporter logs it)
    if group.tier.startswith("root") and _NONE_USED.match(event.message):
        score -= 5  # ... so a peer's own failure (the allocation that failed) says why
    if group.first.in_traceback and not group.first.event.truncated:
        score += 5  # within a tier, a traceback says where; a bare line does not
    if event.kind == "log_error":
        score -= 5  # ... and a typed error says more than the logger's copy of it
    if group.recovered:
        score -= 40
    if group.first.mention:
        score -= 4  # named inside a log line: a line printed as the exception says more
    if event.kind == "oom_kill" and event.message.startswith("oom-kill:"):
        score -= 1  # the kernel's summary of a kill says less than its kill line ("Killed process N")
    if group.tier == "benign":
        score = 1  # only when nothing else was found (a pasted warning, an interrupt)
    if group.tier in ("cascade", "log_error") and _WENT_ON.search(event.message):
        score -= 10  # "..., falling back to simple order": the library said it went on
    if group.tier == "cascade" and _PEER_GONE.pattern.search(event.message):
        score -= 10  # a peer that went away says less than a local failure among the cascade
    elif group.tier == "cascade" and _DEVICE_FAILURE.search(event.message):
        score += 10  # ... and the device failing under it ("Cuda failure 'out of memory'") most
    if group.tier == "log_error" and _STRONG_ERROR.search(event.message):
        score += 10  # an ERROR line that names a real failure beats one that only reports
    if group.tier == "log_error" and group.first.introduces:
        # the line that introduces a traceback reports the traceback's error: even cut
        # before its exception line, the traceback says more (where, and its message)
        score -= 25
    return score


# Words that make an ERROR line name a failure rather than report one.
_STRONG_ERROR = lazyre.compile(r"out of memory|CUDA error|illegal memory|NCCL error|[Ss]egmentation fault|core dumped"
                           r"|\b[A-Z]\w*(?:Error|Exception)\b|[Aa]ssertion"
                           # ... or the operating system's reason (strerror's words): why a call failed
                           r"|Connection refused|Connection reset by peer|No route to host|Network is unreachable"
                           r"|Broken pipe|Permission denied|No such file or directory|No space left on device"
                           r"|Address already in use|Too many open files|Cannot allocate memory")


def _mark_diagnosed(found: list[Found]) -> set[int]:
    """`raise RuntimeError("CUDA out of memory occurred when warming up sampler ... lower
    max_num_seqs") from e`: the engine caught the error and said what it means and what
    to change. That diagnosis is what a person fixes, and it is also all that a shorter
    excerpt of the same crash shows. A wrapper that only repeats its cause (`f"Worker
    failed with error '{e}'"`) or is a known symptom diagnoses nothing."""
    diagnosed: set[int] = set()
    for item in found:
        origin = item.chained_from
        if origin is None or item.event.truncated:
            continue
        if item.chain_kind != "cause" and (not _raised_in_handler(item.event, origin.event)
                                           or item.event.exception.rsplit(".", 1)[-1] in _HANDLER_BUGS):
            continue
        text = f"{item.event.exception}: {item.event.message}"
        if scan.first_rule(P.SYMPTOMS, text) or len(item.event.message) < 30:
            continue
        if origin.event.message[:30] and origin.event.message[:30] in item.event.message:
            continue
        diagnosed.add(id(origin))
    return diagnosed


def _raised_in_handler(later: ErrorEvent, origin: ErrorEvent) -> bool:
    """"During handling of the above exception": the later error was raised where the
    first was caught (its raise site is a frame of the first's stack) when a function
    translates an error (`except KeyError: raise ValueError("... model type ...")`); a
    failure in other code (cleanup in a caller) is noise after the first."""
    if not later.frames or not origin.frames:
        return False
    site = (library_path(later.frames[-1].file), later.frames[-1].function)
    return any((library_path(f.file), f.function) == site for f in origin.frames)


def _group(found: list[Found]) -> list[Group]:
    groups: dict[tuple[str, str], Group] = {}
    diagnosed = _mark_diagnosed(found)
    order: list[Group] = []
    for item in found:
        event = item.event
        if event.truncated and not event.exception:
            key = ("", f"truncated@{event.process}@{event.line_number}")
        else:
            key = (event.exception.rsplit(".", 1)[-1], message_template(event.message)[:160])
        tier, reason = _classify(item, diagnosed)
        printed_at = event.line_number or 0  # before a richer copy takes the group's first line
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(item, tier, reason, [], 0)
            order.append(group)
        elif _better_representative(item, group.first):
            # keep the earliest position but the richest evidence (frames)
            line = min(group.first.event.line_number or 0, event.line_number or 0) or event.line_number
            group.first = item
            item.event.line_number = line
        if _BASE[tier] > _BASE[group.tier]:
            group.tier, group.reason = tier, reason
        group.count += 1
        if printed_at >= group.last_line:
            group.last_line, group.resumed = printed_at, item.next_info
        if event.process and event.process not in group.ranks:
            group.ranks.append(event.process)
    return order


def _without_copies(found: list[Found]) -> list[Found]:
    """The same error is often printed twice: as a log line ("watchdog thread terminated
    with exception: CUDA error: ...") and as the exception that carries it (a C++
    terminate's what(), a Python exception line). The typed exception says more; the log
    line's copy is dropped. A wrapper that quotes the error ("Inspect the stacktrace to
    find the original error: ValueError('...')") carries no error of its own: the line
    that prints the error is kept."""
    typed = list(dict.fromkeys(item.event.message for item in found  # every rank repeats it
                               if item.event.kind in ("python", "cpp") and item.event.message and not item.mention
                               and not scan.first_rule(P.SYMPTOMS, f"{item.event.exception}: {item.event.message}")))
    if not typed:
        return found
    kept = []
    for item in found:
        event = item.event
        core = event.message.strip()[:80]
        if (event.kind not in ("python", "cpp") or item.mention) and len(core) >= 24 and any(
                core in message and message.strip()[:80] != core for message in typed):
            continue
        kept.append(item)
    return kept


def _mark_recovered(groups: list[Group]) -> None:
    roots = [g for g in groups if g.tier.startswith("root")]
    if len(roots) < 2:
        return
    last_root_line = max(g.first.event.line_number or 0 for g in roots)
    for group in roots:
        # an error that came back later in the log (a second attempt failing the same
        # way) was not recovered from: its last repeat counts. Normal records only after
        # the run-ending error too are the shutdown (a server stopping), not a recovery.
        if group.last_line < last_root_line and 0 < group.resumed < last_root_line:
            group.recovered = True
            group.reason = f"{group.reason}; the process went on normally afterwards (recovered)"


_RELAYED_CHARS = 30  # a line this long is a statement of its own, not a common phrase
_RELAYED_TAIL = 100


def _mark_relayed(groups: list[Group]) -> None:
    """A later error whose message holds a whole line of an earlier error's message, in
    words of its own around it, relays that error: tokio's `Error: task 20 panicked with
    message "<the panic's message>"` after the panic, a supervisor's "child failed: <its
    error>". It points at the earlier error, as a wrapper does; a repeat of the error
    (the same first line) is not a relay."""
    stated = [(g.first.event.line_number or 0, snippet) for g in groups
              if g.tier.startswith("root") or g.tier == "cascade"
              for line in {part.strip() for part in g.first.event.message.split("\n")}
              if len(line) >= _RELAYED_CHARS and not any(rule.pattern.search(line) for rule in P.MESSAGE_BOILERPLATE)
              # a long line's end too: a relay quotes the message, the line may carry a header
              # a terminal's cut glued to it ("panicked at worker.rs:247:17:Failed to ...")
              for snippet in {line, line[-_RELAYED_TAIL:]}]
    for group in groups:
        event = group.first.event
        if not group.tier.startswith("root"):
            continue
        first = event.message.strip().split("\n", 1)[0]
        for number, line in stated:
            if number < (event.line_number or 0) and line in event.message and not first.startswith(line):
                group.tier = "symptom"
                group.reason = f"relays an earlier error (line {number}): {line[:80]}"
                break


def _mark_exit_reports(groups: list[Group]) -> None:
    """`Error: <what failed>` outside any traceback is a program's exit report (Rust's
    `main` returning an anyhow error, with its "Caused by:" chain; a Go CLI): it wraps an
    error its process logged before it ("ERROR ... Could not start Candle backend: cannot
    find tensor dense.weight", then "Error: Could not create backend"). With such an error
    before it (its process's, or a JSON record's the stream split off) it is set aside;
    alone, it is all the log says (an ollama CLI's reply).

    A service manager's report that the main process exited with a status (systemd's
    "Main process exited, code=exited, status=1/FAILURE") wraps whatever that process
    printed before it, a wrapper included: the status is how the error ended the
    process, not which error it was."""
    for group in groups:
        event = group.first.event
        if event.exception == "exit status" and group.tier == "confirmation":
            wrapped = _not_benign
            reason = "a service manager's exit report: it wraps what its process printed before it"
        elif (event.exception == "Error" and not event.frames and not group.first.in_traceback
              and group.tier.startswith("root")):
            wrapped = _an_error
            reason = "a program's exit report: it wraps the error its process logged before it"
        else:
            continue
        if any(other is not group and not other.recovered and wrapped(other) and _line(other) < _line(group)
               for other in groups):
            group.tier, group.reason = "symptom", reason


def _not_benign(group: Group) -> bool:
    return group.tier != "benign"


def _an_error(group: Group) -> bool:
    return group.tier.startswith("root") or group.tier == "log_error"


PROPAGATION_LINES = 4  # how close below a native failure its callers report giving up


def _mark_propagated(groups: list[Group]) -> None:
    """Native code reports a failure where it happens, then each caller prints its own
    line as it gives up ("ggml_gallocr_reserve_n: failed to allocate ..." under the
    cudaMalloc that failed, "llama_load_model_from_file: failed to load model" under the
    loader's reason): a native failure a few lines below another native or rule error
    of the same stream is that error propagating, not a cause of its own."""
    rule_lines = sorted(((g.first.key, line) for g in groups if g.tier == "root-rule" and g.first.event.kind != "signal"
                         for line in {g.first.event.line_number or 0, g.last_line}), key=lambda k: k[1])
    for group in groups:
        event = group.first.event
        if event.kind != "native" or group.tier != "root-rule":
            continue
        line = event.line_number or 0
        if any(key == group.first.key and 0 < line - other <= PROPAGATION_LINES for key, other in rule_lines):
            group.tier = "cascade"
            group.reason = "a caller reporting the native failure just above it"


def _better_representative(new: Found, old: Found) -> bool:
    return len(new.event.frames) > len(old.event.frames) and not new.event.truncated


# What a warning that reports a failure says: something failed, is missing, does not fit
# or is refused ("CUDA initialization: The NVIDIA driver on your system is too old").
_FAILURE_TERMS = lazyre.compile(
    r"\b(?:errors?|fail(?:ed|s|ure)?|unable|cannot|can't|could not|couldn't|not (?:found|supported|available|"
    r"compatible|enough|initiali[sz]ed)|unsupported|incompatible|too (?:old|new|large|small|long|many|few)|"
    r"invalid|mismatch(?:ed)?|missing|exceed(?:s|ed)?|out of memory|timed out|refused|denied|no \w+ (?:found|available))\b",
    re.I)
# ... and one that says the failure is harmless ("You may ignore this warning if ...")
_HARMLESS = lazyre.compile(r"\b(?:may|can) (?:safely )?(?:be )?ignored?\b", re.I)


def _warns_of_failure(text: str) -> bool:
    """Whether a Python warning's text reports a failure that is not declared harmless."""
    return bool(_FAILURE_TERMS.search(text)) and not _HARMLESS.search(text)


# multiprocessing's transport: a pipe read or written, a handle taken from another process
_PIPE_TRANSPORT = frozenset({"_recv", "_recv_bytes", "recv", "recv_bytes", "_send", "_send_bytes", "send",
                             "send_bytes", "poll", "_poll", "detach", "steal_handle", "recvfds", "sendfds"})
_PIPE_MODULE = lazyre.compile(r"(?:^|[/\\])multiprocessing[/\\](?:connection|reduction)\.py$")
_OS_FAILURES = frozenset({"OSError", "PermissionError", "EOFError", "BrokenPipeError", "ConnectionResetError",
                          "ConnectionAbortedError", "ConnectionError"})


def _lost_pipe(event: ErrorEvent) -> bool:
    """An OS error raised in multiprocessing's transport (its last frame a pipe's read or
    write, or the duplication of another process's handle): the process at the other end
    is gone. Its own error, if the log shows it, is the cause; a pickling error raised in
    the same modules is not a transport's and stays a cause."""
    if event.kind != "python" or not event.frames or event.exception.rpartition(".")[2] not in _OS_FAILURES:
        return False
    last = event.frames[-1]
    return last.function in _PIPE_TRANSPORT and bool(_PIPE_MODULE.search(last.path or last.file))


def _classify(item: Found, diagnosed: set[int] = frozenset()) -> tuple[str, str]:
    event = item.event
    if event.kind == "log_error":
        text = event.message
    else:
        text = f"{event.exception}: {event.message}" if event.message else event.exception
    if not item.in_traceback and scan.first_rule(P.NEVER_CAUSE, text):
        return "noise", "a deprecation notice"  # (raised, under `python -W error`, it is the error)
    benign = scan.first_rule(P.BENIGN, text) or (item.header and scan.first_rule(P.BENIGN, item.header))
    if benign:
        if benign.name == "warnings" and not item.in_traceback and not _warns_of_failure(text):
            # advice ("TORCH_CUDA_ARCH_LIST is not set, all archs ... are included") or a
            # failure it calls harmless: not the error even when the log shows no other
            return "noise", "a Python warning that states no failure"
        return "benign", f"{benign.name}: {benign.why}"
    if item.level == "WARNING" and (item.in_traceback or (event.kind == "python" and not item.mention)):
        # the traceback, or its last line read alone (the pre-filter passes the lines
        # around another process's error): either way the engine logged it and went on
        return "benign", "logged at WARNING level: the engine recovered from it"
    if id(item) in diagnosed:
        return "symptom", "the cause of a later exception that says what it means (raised from it)"
    if item.chained_from is not None and id(item.chained_from) in diagnosed:
        return "root-traceback", "the engine's diagnosis of the error it was raised from (or while handling)"
    if item.chained_from is not None and _chain_root(item) is not item:
        origin = _chain_root(item).event
        verb = "raised from" if item.chain_kind == "cause" else "raised while handling"
        return "symptom", f"{verb} {origin.exception or 'an earlier error'} in the same process"
    symptom = scan.first_rule(P.SYMPTOMS, text)
    if symptom:
        return "symptom", f"{symptom.name}: {symptom.why}"
    cascade = scan.first_rule(P.CASCADES, text)
    if cascade:
        return "cascade", f"{cascade.name}: {cascade.why}"
    if _lost_pipe(event):
        return "cascade", ("raised where multiprocessing moves data or handles over a pipe to another "
                           "process: that process went away first (Windows: 'Access is denied')")
    if event.role == "cascade":
        return "cascade", event.reason or "cascade"
    if event.role == "confirmation":
        return "confirmation", event.reason or "confirmation"
    if event.kind == "log_error":
        if event.exception not in (LOGGED_ERROR, "OSError") and event.reason:
            # a rule knows the statement and names its kind (argparse's usage error, Ray's
            # infeasible resource request): more than any ERROR line says
            return "root-rule", event.reason
        if _EXIT_ONLY.search(event.message):
            return "symptom", ("it says only how a process ended (its exit status): that process's own "
                               "output says why")
        return "log_error", event.reason or "an ERROR line with no exception"
    if event.truncated:
        if item.inferred:
            return "root-inferred", "the log ends inside the traceback; the type comes from the `raise` line"
        return "truncated", event.reason or "the log ends inside this traceback: its exception line is missing"
    if event.kind in ("cpp", "cuda", "native", "signal", "oom_kill") or (event.kind == "python" and event.reason):
        return "root-rule", event.reason or "error line"
    if item.in_traceback:
        return "root-traceback", "the exception that ends this traceback"
    return "root-line", "an exception line"


def _chain_root(item: Found) -> Found:
    """The first exception of a chain, skipping control-flow exceptions it started from."""
    chain = [item]
    while chain[-1].chained_from is not None and len(chain) < 20:
        chain.append(chain[-1].chained_from)
    chain.reverse()
    for candidate in chain:
        if candidate.event.exception.rsplit(".", 1)[-1] not in _BAD_CHAIN_START:
            return candidate
    return item


def _as_event(group: Group) -> ErrorEvent:
    event = group.first.event
    event.frames = [f if f.path else Frame(library_path(f.file), f.function, f.line, f.code, f.file) for f in event.frames]
    event.ranks = list(group.ranks)
    event.role = group.tier.split("-")[0] if group.tier.startswith("root") else group.tier
    event.reason = group.reason if group.count == 1 else f"{group.reason} (repeated {group.count} times)"
    event.confidence = _CONFIDENCE[group.tier]
    if event.truncated:
        event.confidence = min(event.confidence, 0.6)
    return event
