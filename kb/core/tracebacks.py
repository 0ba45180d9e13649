"""Find errors in parsed lines: Python tracebacks (with their chains), C++ terminates,
and the error lines of the ERROR_LINES / KNOWN_MESSAGES tables.

One `_Stream` per process holds the traceback being read, so interleaved processes never
mix their frames. Lines arrive in log order; `feed` is called once per kept line."""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field, replace

from kb.core import lazyre, patterns as P
from kb.core import scan
from kb.core.comparable import CARRIED_ERROR
from kb.core.lazyre import lazy
from kb.core.normalize import message_template
from kb.core.records import LOGGED_ERROR, ErrorEvent, Frame
from kb.core.split import LogLine

_MAX_FRAMES = 120
_MAX_CONTINUATION = 25
_CUT_TEXT_LINES = 3  # lines an error's text cut by line breaks may go on for
# An OSError's text is strerror() after its errno, and a file name: one line, always
# ("[Errno 98] Address already in use" then "Starting vLLM..." is the next print).
_OS_ERROR_TEXT = lazy(r"^\[Errno \d+\] [^\n]+$")
# libstdc++'s terminate handler, and libc++'s (clang, macOS): its message after the type
# on the same line, or alone on the next
_TERMINATE = lazy(r"terminate called after throwing an instance of '(?P<type>(?:[a-z]\w*::)*\w*?(?:Error|Exception|error|exception|bad_alloc)|[\w:]+?(?='))"
                  r"|libc\+\+abi: terminating due to uncaught exception of type (?P<libcxx>\w+(?:::\w+)*)(?::[ \t]*(?P<said>.*))?")
_WHAT = lazy(r"^\s*what\(\):\s+(?P<msg>.*)$")
_WHAT_INLINE = lazy(r"\bwhat\(\):\s+(?P<msg>.+?)(?:\s+Aborted(?: \(core dumped\))?\W*)?$")
_CPP_END = lazy(r"^(?:Exception raised from|frame #\d+|\d+\s+0x[0-9a-f]+ )")
_TABLE_BORDER = lazy(r"^\+-[-+]*$")
_RICH_FRAME = lazy(r"^│ \S.*\.py:\d+ in\b")  # `│ /x/config.py:935 in _configure │`
# "Could not import X: why", "Failed to load X with ImportError(...)": X, what went missing.
# Only with its reason: a bare "Failed to load model" says less than the error after it.
_UNLOADED = lazy(r"\b(?:[Cc]ould not|[Cc]ouldn't|[Uu]nable to|[Ff]ailed to|[Cc]annot|[Cc]an't) (?:import|load) "
                 r"(?P<what>[\w'\"`][^:(]{2,80}?)(?::\s+\S|\s+with\s|\s+because\s|\s*\()")
_MAX_UNLOADED = 64
# where Python's warnings module says a warning came from: a file, or a frozen module
_WARNED_AT = r"(?:\S+\.py|<frozen [\w.]+>|<string>|<stdin>):\d+: "
_WARNING_HEAD = lazy(rf"^{_WARNED_AT}(?P<exc>[A-Z]\w*Warning):$")  # Python's warnings, text on the next line
_PANEL_TOP = lazy(r"^[╭┌┏╔][─━═]")  # a box drawn with Unicode lines: Rich's traceback panel, a table
_PROCESS_HEADER = lazy(r"^Process [\w-]+:$")
# zsh's report that the job died, where a flattened copy glued it after the error's text
_JOB_REPORT = lazy(rf"\s+zsh: (?:{P.ZSH_CRASH_WORDS}|{P.ZSH_SIGNAL_WORDS})\b")
# the last line of a c10::Error's text (PyTorch's C++ side), before its C++ stack
_C10_RAISED = lazy(r"^Exception raised from \S+ at \S+:\d+ \(most recent call first\)")
_XOSCAR = lazy(r"^\[address=[^\]]*, pid=\d+\] ")
_ESCAPED_NEWLINE = "\\n"


@dataclass(slots=True)
class Found:
    """An error as found, with what the root-cause choice needs beyond ErrorEvent."""

    event: ErrorEvent
    level: str | None = None
    timestamp: str | None = None
    record: tuple | None = None
    chained_from: Found | None = None  # the exception this one was raised from/while handling
    chain_kind: str | None = None  # "cause" | "context"
    header: str | None = None  # log text printed right before the traceback
    in_traceback: bool = False
    inferred: bool = False  # exception type inferred from a `raise` line on a truncated log
    key: tuple | None = None  # the stream (capture label, process) it was found in
    mention: bool = False  # named inside a log line rather than printed as an exception line
    wraps: bool = False  # its record's message goes on, wrapped, on the next unprefixed lines
    next_info: int = 0  # the line of its stream's first INFO record after it (0: none)
    # a logged line that introduces the traceback after it ("EngineCore hit an exception:
    # Traceback ..."): the traceback's error is the one it reports
    introduces: bool = False
    end_line: int = 0  # the line its message's last continuation line began on (0: none)
    first_line: int = 0  # where its traceback began (0: not a traceback, or its header cut)
    # asyncio's report of a task nobody awaited ("future: <Task finished ... exception=X('m')>"):
    # it names the exception the task's traceback, printed next, ends with
    task_result: bool = False
    # the text before a mention's exception on its line (pytest's `E   `): the lines of its
    # message that repeat it carry it as a prefix, not as words of the message
    lead: str = ""
    # a text a line break cut ("GGML_ASSERT(S", then " > 0) failed"): what closes it (its
    # rule's `closes`) and the lines below it held until one does (see _cut_text)
    cut: tuple[re.Pattern[str], list[str]] | None = None


@dataclass(slots=True)
class _Stream:
    key: tuple | None = None
    frames: list[Frame] | None = None  # not None while a traceback is open
    tb_line: LogLine | None = None
    tb_header: str | None = None
    tb_type: str | None = None  # the type IPython's header names ("RuntimeError   Traceback ...")
    tb_intro: str | None = None  # the logged line alone just above the open traceback
    last_found_end: int = 0  # the last physical line of the line last_found was found on
    pending_chain: str | None = None
    last_found: Found | None = None
    continuation_of: Found | None = None
    continuation_lines: int = 0
    continuation_layers: tuple[str, ...] = ()  # the capture layers of the line it continues
    # the message before the last continuation line, while that line could be a code line
    # (indented): taken back if a frame's `File` line follows it
    before_code_line: tuple[Found, str] | None = None
    last_number: int = 0
    cpp: Found | None = None
    cpp_message_below: bool = False  # the C++ error's message is the next line
    native: Found | None = None  # a native error whose site lines (ggml's "in function f at x.cu:1") may follow
    pending_header: str | None = None  # "Exception ignored in: ..." printed before its traceback
    bare: Found | None = None  # `RuntimeError:` alone: an exception only if its text follows, indented
    bare_unindented: bool = False  # ... or a warning's `x.py:N: UserWarning:`, whose text follows as is
    indented_frames: bool = False  # the open traceback's `File` lines are indented, as Python prints them
    frame_indent: int = 2  # ... and by how much (2 as Python prints them; more when pasted indented)
    stack_dump: bool = False  # a headerless one whose frames are faulthandler's ("line 12 in f"): a dump
    causes_of: Found | None = None  # an error whose "Caused by:" chain (Rust's anyhow) is being read
    help_block: list[str] | None = None  # the lines of an Open MPI help message open between its rulers
    help_found: int = 0  # how many errors were found when it opened
    help_line: int = 0  # the number of its first line
    untyped_tail: str | None = None  # an unindented line after its frames: the exception line, its type cut off
    untyped_lines: int = 0  # how many such lines: more than one is other output, not a message
    previous: str = ""  # the stream's last line, stripped
    before: str = ""  # the line just before the one being read, when the two are contiguous


@dataclass
class Extractor:
    found: list[Found] = field(default_factory=list)
    streams: dict[str | None, _Stream] = field(default_factory=dict)
    # errors whose stream has not logged an INFO record since (stream key -> errors)
    awaiting_info: dict[tuple | None, list[Found]] = field(default_factory=dict)
    # a traceback printed inside one log record ("[.. TP3] Scheduler hit an exception: Traceback ...")
    # continues on lines without any prefix: they belong to that record's process
    embedded: tuple | None = None
    faulthandler: Found | None = None
    # the first line that shows an error happened without stating it (a traceback header,
    # a chain marker, a hint printed after an error): a log with only these is a capture gap
    unstated: tuple[int, str] | None = None
    # the first unlevelled line that states a failure in words and matched no rule, and the
    # different statements (up to two) there were, the same one printed by each device or
    # rank counted once (numbers and ids masked): the one statement of a log without any
    # error is that error
    statement: Found | None = None
    statement_templates: set[str] = field(default_factory=set)
    # the first native stack (NATIVE_STACK_FRAMES frames in a row, any native format) and where
    # it began: in a log without any error, the line that said what crashed was cut above it
    native_stack: tuple[int, str] | None = None
    # the run of native frames being read: its last line, how many, its first line and text
    _stack_run: tuple[int, int, int, str] = (0, 0, 0, "")
    # the last WARNING lines that state a failure in words: in a log without any error, those
    # among its last lines are its error (Ray's "Failed to connect to GCS ... within 5 seconds")
    warned: deque[Found] = field(default_factory=lambda: deque(maxlen=_WARNED_KEPT))
    # lines saying a component could not be imported or loaded ("Could not import Flash
    # Attention enabled models: <why>"): the engine went on without it, and a later error
    # that needs it is this line's consequence (kb.core.rootcause._unloaded_component)
    unloaded: list[tuple[Found, str]] = field(default_factory=list)

    # ----------------------------------------------------------------------------------
    def feed(self, line: LogLine) -> None:
        body = line.body
        if _ESCAPED_NEWLINE in body and ('File \\"' in body or "Traceback" in body):
            # A traceback embedded in a JSON string (TGI's launcher): unescape and replay.
            for i, part in enumerate(_embedded_lines(body)):
                self._feed(LogLine(line.number, part, line.process, line.level, line.timestamp, line.source,
                                   line.header and i == 0, line.engine, line.stream, line.host))
            return
        self._feed(line)

    def finish(self) -> list[Found]:
        for key, stream in self.streams.items():
            if stream.frames is not None:
                self._close_truncated(key, stream)
            if stream.help_block and len(self.found) == stream.help_found \
                    and _STATES_FAILURE.search(" ".join(stream.help_block)):
                # an Open MPI help message the excerpt ends inside: what it said of the failure
                self._help_message(stream, stream.help_block, stream.help_line, None,
                                   "Open MPI's help message (show_help), cut by the log's end")
        for found in self.found:  # messages are complete only now (continuation lines)
            _unwrap_validation_error(found.event)
            _unwrap_relayed_repr(found.event)
            _unwrap_carried_error(found.event)
            _assert_statement(found.event)
        return self.found

    # ----------------------------------------------------------------------------------
    def _feed(self, line: LogLine) -> None:
        if line.level in ("INFO", "DEBUG") and self.awaiting_info:
            for found in self.awaiting_info.pop(line.key, ()):
                found.next_info = line.number
        if (line.process is None and not line.header and self.embedded is not None
                and line.stream == self.embedded[0]):
            line.process = self.embedded[1]
        if self._faulthandler_line(line):
            return
        stream = self.streams.get(line.key)
        if stream is None:
            stream = self.streams[line.key] = _Stream(key=line.key)
        contiguous = line.number - stream.last_number <= 1
        stream.last_number = line.number + line.pieces - 1
        body = line.body
        stripped = body.strip()
        previous = stream.previous
        stream.before, stream.previous = (previous if contiguous else ""), stripped
        if stripped.startswith('"message"') and contiguous and self._error_object(line, stream, previous, stripped):
            return
        if stream.bare is not None:
            bare, stream.bare = stream.bare, None
            unindented, stream.bare_unindented = stream.bare_unindented, False
            # bitsandbytes' "RuntimeError:\n        CUDA Setup failed ...", and a message that
            # begins with a newline (torch's "RuntimeError:\nThe detected CUDA version ..."):
            # the next line, if it reads as words, not as a record or a list of its own
            sentence = not line.header and line.level is None and stripped[:1].isalpha()
            # ... not another exception's line ("Error:" a reporter wrote above the error)
            named = P.EXCEPTION_LINE.match(stripped)
            another = named is not None and named["msg"] is not None and _looks_like_exception(named["exc"], False)
            if contiguous and stripped and not another and (body[:1] in (" ", "\t") or unindented or sentence):
                self._add(stream, bare)
                stream.continuation_of, stream.continuation_lines = bare, 0
                stream.continuation_layers = line.layers

        if stream.frames is not None:
            if self._traceback_line(line, stream, body, stripped):
                return
        if stream.cpp is not None and self._cpp_line(stream, stripped, contiguous):
            return
        if stream.native is not None and self._native_site_line(stream, stripped, contiguous):
            return

        start = body.find("Traceback (most recent call last)")
        ipython = P.IPYTHON_HEADER.match(body) if start > 0 else None
        if start >= 0 and (body.startswith(":", start + len("Traceback (most recent call last)")) or ipython):
            # (IPython's header names the type first; its message is on the traceback's last line)
            header = None if ipython else body[:start].rstrip(" :,") or stream.pending_header
            stream.pending_header = None
            self._end_continuation(stream)
            if header:
                before = len(self.found)
                self._plain_line(line, stream, header, header.strip())
                for found in self.found[before:]:
                    found.introduces = found.event.kind == "log_error"
            self._evidence(line, "Traceback (most recent call last):")
            stream.tb_intro = None if header else _intro(line, stream)
            stream.frames = []
            stream.tb_line = line
            stream.tb_header = header
            stream.tb_type = ipython["exc"] if ipython else None
            if header and line.header and line.process is not None:
                self.embedded = line.key
            return
        if not stripped:
            self._end_continuation(stream)
            return
        if P.CHAIN_CAUSE in body or P.CHAIN_CONTEXT in body:
            self._evidence(line, stripped)
        if P.CHAIN_CAUSE in body:
            stream.pending_chain = "cause"
            self._end_continuation(stream)
            return
        if P.CHAIN_CONTEXT in body:
            stream.pending_chain = "context"
            self._end_continuation(stream)
            return
        if stream.causes_of is not None:
            if body[:1] in (" ", "\t") and stripped:
                # anyhow's chain, outermost first ("0: creating primary lease", "1: grpc
                # request error: ..."): the error is the whole chain, as anyhow's one-line
                # form ("{:#}") prints it: "outer: cause: innermost cause"
                event = stream.causes_of.event
                event.message = f"{event.message.rstrip()}: {_CAUSE_NUMBER.sub('', stripped)}"
                event.reason = "an error and its \"Caused by:\" chain, the innermost cause last"
                return
            if stripped:
                stream.causes_of = None
        if stripped == "Caused by:" and stream.last_found is not None and line.number - stream.last_found_end <= 2:
            stream.causes_of = stream.last_found
            self._end_continuation(stream)
            return
        if stream.continuation_of is not None:
            if self._continuation(line, stream, stripped, contiguous):
                return
        self._plain_line(line, stream, body, stripped)

    def _evidence(self, line: LogLine, text: str) -> None:
        if self.unstated is None:
            self.unstated = (line.number, text[:160])

    # -- inside a Python traceback ------------------------------------------------------
    def _traceback_line(self, line: LogLine, stream: _Stream, body: str, stripped: str) -> bool:
        frames = stream.frames
        assert frames is not None
        match = P.FRAME.match(body) or (P.IPYTHON_FRAME.match(body) if stream.tb_type else None)
        if match:
            stream.indented_frames = body[:1] in (" ", "\t")
            stream.frame_indent = len(body) - len(body.lstrip())
            stream.untyped_tail, stream.untyped_lines = None, 0  # more frames: that line was not the last
            stream.stack_dump = stream.stack_dump and bool(P.DUMP_FRAME.match(body))
            if len(frames) < _MAX_FRAMES:
                frames.append(Frame(match["file"], (match["func"] or "?").strip(), int(match["line"])))
            else:
                frames[-1] = Frame(match["file"], (match["func"] or "?").strip(), int(match["line"]))
            return True
        if stream.stack_dump:
            # The excerpt starts inside faulthandler's dump of a thread's stack (most recent
            # call first, no code lines, no exception line): it ends at the first other line,
            # and states no error of its own (the fatal error above it was cut).
            stream.frames, stream.tb_line, stream.stack_dump = None, None, False
            return False
        if not stripped or P.CARET.match(body):
            return True
        if "Traceback (most recent call last):" in body:
            self._close_truncated(line.key, stream)
            return False
        if stream.tb_type and _IPYTHON_LISTING.match(stripped):
            # IPython lists each frame's source, numbered, an arrow at the line it ran
            if frames and stripped.startswith("-") and frames[-1].code is None:
                last = frames[-1]
                frames[-1] = Frame(last.file, last.function, last.line, stripped.lstrip("->").strip().partition(" ")[2][:300])
            return True
        exc = P.EXCEPTION_LINE.match(stripped)
        # Python prints frames two columns right of the exception line; a traceback pasted
        # indented (quoted in a report, a launcher's nested output) keeps that step. One
        # re-indented as a whole (a fence in a markdown list item) may lose it, but never
        # prints a frame's code at or left of its `File` line: a line there ends the frames.
        indent = len(body) - len(stripped)
        at_exception = (not body.startswith((" ", "\t")) or indent == stream.frame_indent - 2
                        or (indent <= stream.frame_indent and bool(frames) and frames[-1].code is not None))
        if exc and at_exception and _looks_like_exception(exc["exc"], in_traceback=True):
            self._close(line, stream, exc["exc"], exc["msg"] or "")
            return True
        if not body.startswith((" ", "\t")) and _states_error(stripped):
            self._close_truncated(line.key, stream)  # a native crash banner cut the traceback short
            return False
        if (exc is None and frames and stream.indented_frames and frames[-1].code is not None
                and not body.startswith((" ", "\t"))):
            # Code is indented under an indented `File` line; an unindented line after it
            # is where Python prints the exception. Without `Type: ` (a paste that cut
            # it) it is the message, if the traceback ends there and nothing else (a
            # progress bar, another record) was printed in between.
            raised = P.RAISE_CALL.match(frames[-1].code or "")
            named = P.EXCEPTION_MENTION.search(stripped) if raised else None
            if (named is not None and named["msg"] is not None
                    and named["exc"].rpartition(".")[2] == raised["exc"].rpartition(".")[2]):
                # the exception line the last frame's `raise` names, behind a prefix the
                # capture did not peel (an excerpt that shows it on a few lines only)
                self._close(line, stream, named["exc"], named["msg"])
                if stream.continuation_of is not None:
                    stream.continuation_of.lead = stripped[:named.start()]
                return True
            if not _PROGRESS.search(stripped):  # a redrawn progress bar, whoever drew it, is not
                stream.untyped_lines += 1
                if line.level in (None, _tb_level(stream)) and _says_something(stripped):
                    # (a message says something in words: a record header cut mid-time,
                    # `ERROR 12-16 02:10:2`, where an excerpt ends, says nothing)
                    stream.untyped_tail = stripped[:1000]
            return True
        if frames and (body.startswith((" ", "\t")) or not body[:1].isupper()):
            last = frames[-1]
            if last.code is None:
                frames[-1] = Frame(last.file, last.function, last.line, stripped[:300])
            return True
        if frames and P.EXCEPTION_LINE.match(stripped) is None and ": " not in stripped[:80]:
            # unindented code (some viewers drop indentation)
            last = frames[-1]
            if last.code is None:
                frames[-1] = Frame(last.file, last.function, last.line, stripped[:300])
            return True
        first_frame = not frames and body.startswith((" ", "\t"))  # where Python prints a frame: cut ("  Fi")
        if exc and not first_frame and (exc["msg"] is not None or _looks_like_exception(exc["exc"], in_traceback=True)):
            self._close(line, stream, exc["exc"], exc["msg"] or "")
            return True
        # Something else interrupted the traceback (another record, a line cut short
        # where an excerpt ends): keep what we have.
        self._close_truncated(line.key, stream)
        return False

    def _close(self, line: LogLine, stream: _Stream, exception: str, message: str) -> None:
        if self.embedded == line.key:
            self.embedded = None
        frames = stream.frames or []
        message, process = _split_embedded_process(message, _label(line))
        event = ErrorEvent(exception=exception, message=message, process=process, frames=list(frames),
                           line_number=line.number, kind="python")
        found = Found(event, line.level or (stream.tb_line.level if stream.tb_line else None),
                      line.timestamp or (stream.tb_line.timestamp if stream.tb_line else None),
                      line.record, header=stream.tb_header, in_traceback=True,
                      first_line=stream.tb_line.number if stream.tb_line else 0)
        self._chain(stream, found)
        stream.frames = None
        stream.tb_line = None
        stream.tb_header = stream.tb_intro = stream.tb_type = None
        self._add(stream, found)
        stream.continuation_of = found
        stream.continuation_lines = 0
        stream.continuation_layers = line.layers

    def _close_truncated(self, key: str | None, stream: _Stream) -> None:
        frames = stream.frames or []
        tb_line = stream.tb_line
        stream.frames = None
        stream.tb_line = None
        if self.embedded == key:
            self.embedded = None
        if not frames and not stream.tb_type:
            return
        exception, message, inferred = stream.tb_type or "", "", False
        stream.tb_type = None
        code = frames[-1].code or "" if frames else ""
        raise_match = P.RAISE_CALL.match(code)
        untyped = stream.untyped_tail if stream.untyped_lines == 1 else None
        stream.untyped_tail, stream.untyped_lines = None, 0
        if untyped:
            message = untyped
        elif raise_match:
            exception, message, inferred = exception or raise_match["exc"], (raise_match["msg"] or "").strip(), True
        elif code.startswith("assert ") and not exception:
            # ... as an `assert` raises AssertionError: its statement is what a bare one says
            exception, message, inferred = "AssertionError", code, True
        elif stream.tb_header:
            message = _stated_in_header(stream.tb_header)
        elif stream.tb_intro:
            message = stream.tb_intro  # what the logger said the error was, cut before its type
        event = ErrorEvent(exception=exception, message=message, process=_key_label(key), frames=list(frames),
                           line_number=tb_line.number if tb_line else None, truncated=True, kind="python",
                           reason="the traceback ends with its exception's message, the type cut off" if untyped else None)
        found = Found(event, tb_line.level if tb_line else None, tb_line.timestamp if tb_line else None,
                      None, header=stream.tb_header, in_traceback=True, inferred=inferred)
        self._chain(stream, found)
        self._add(stream, found)

    def _error_object(self, line: LogLine, stream: _Stream, previous: str, stripped: str) -> bool:
        """An error serialized as an object, one field a line: `"name": "RuntimeError",` then
        `"message": "..."` (a notebook's error output copied from VS Code, whose "stack"
        field follows with the traceback, often cut)."""
        name, said = _OBJECT_ERROR_NAME.match(previous), _OBJECT_ERROR_MESSAGE.match(stripped)
        if name is None or said is None or not _looks_like_exception(name["exc"], in_traceback=False):
            return False
        event = ErrorEvent(exception=name["exc"], message=said["msg"].replace('\\"', '"'), process=_label(line),
                           line_number=line.number, kind="python")
        self._add(stream, Found(event, line.level, line.timestamp, line.record))
        return True

    def _chain(self, stream: _Stream, found: Found) -> None:
        if stream.pending_chain and stream.last_found is not None:
            found.chained_from = stream.last_found
            found.chain_kind = stream.pending_chain
        stream.pending_chain = None

    # -- message continuation lines -------------------------------------------------------
    def _continuation(self, line: LogLine, stream: _Stream, stripped: str, contiguous: bool) -> bool:
        found = stream.continuation_of
        assert found is not None
        # vLLM repeats its header (with the same source) on every line of a record; a
        # header without a source starts a new record.
        same_record = (line.record == found.record and (line.source is not None or not line.header)
                       if found.record and not found.wraps else not line.header)
        # a line another capture layer wraps (a timestamp the exception line lacks): another record
        rewrapped = line.layers != stream.continuation_layers
        if (not contiguous or not same_record or rewrapped or _OS_ERROR_TEXT.match(found.event.message)
                or stream.continuation_lines >= _MAX_CONTINUATION or _starts_structure(stripped)):
            if stream.before_code_line and stream.before_code_line[0] is found and stripped.startswith('File "'):
                # the indented line was the code line of a frame another process's traceback
                # printed in between (interleaved stderr): its File line follows, not words
                found.event.message = stream.before_code_line[1]
            self._end_continuation(stream)
            return False
        if P.CARET.match(line.body) and not stream.continuation_lines:
            # carets mark a code line (as in a compiler's listing the message quotes), never
            # a message's first line: another process's traceback is interleaved here
            self._end_continuation(stream)
            return True
        stream.continuation_lines += 1
        if found.cut is not None:
            return self._cut_text(found, stream, stripped)
        if _is_boilerplate(stripped):
            return True
        event = found.event
        code_like = not found.wraps and line.body[:4] == "    " and line.body[4:5] != " "
        stream.before_code_line = (found, event.message) if code_like else None
        found.end_line = line.number
        if found.wraps:  # a sentence wrapped in a column: its words go on
            event.message = f"{event.message} {stripped}".strip()
        else:
            if found.lead and stripped.startswith(found.lead):
                text = stripped[len(found.lead):]
            elif found.lead and stripped == found.lead.rstrip():
                text = ""  # a blank line of the message, its lead left alone
            else:
                text = line.body
            event.message = f"{event.message}\n{text}" if event.message else text.strip()
        return True

    def _cut_text(self, found: Found, stream: _Stream, stripped: str) -> bool:
        """A line below an error whose text a line break cut (an assertion's condition,
        a reason on the next line): the line that closes it ends the text, and the lines
        up to it are its words; none within _CUT_TEXT_LINES, and they were other output
        (the error stays as cut)."""
        assert found.cut is not None
        closes, pieces = found.cut
        pieces.append(stripped)
        if closes.search(stripped):
            found.event.message = " ".join([found.event.message, *pieces]).strip()
            found.end_line = found.event.line_number + len(pieces) if found.event.line_number else 0
        elif len(pieces) < _CUT_TEXT_LINES:
            return True
        found.cut = None
        self._end_continuation(stream)
        return True

    @staticmethod
    def _end_continuation(stream: _Stream) -> None:
        stream.continuation_of = None
        stream.continuation_lines = 0
        stream.before_code_line = None

    # -- C++ std::terminate -----------------------------------------------------------------
    def _cpp_line(self, stream: _Stream, stripped: str, contiguous: bool) -> bool:
        cpp = stream.cpp
        assert cpp is not None
        if stream.cpp_message_below:  # libc++ printed the type, then the message alone
            stream.cpp_message_below = False
            if contiguous and stripped and not cpp.event.message:
                cpp.event.message = stripped
                return True
        what = _WHAT.match(stripped)
        if what:
            if not cpp.event.message:
                cpp.event.message = what["msg"].strip()
            return True
        if _CPP_END.match(stripped) or not stripped or stripped.startswith("terminate called"):
            if cpp.event.message:
                stream.cpp = None
            return bool(stripped) and not stripped.startswith("terminate called")
        if cpp.event.message and contiguous and "Traceback" not in stripped and not _starts_structure(stripped):
            if not _is_boilerplate(stripped):
                cpp.event.message += "\n" + stripped
            return True
        if not cpp.event.message and stripped.strip("'") == "":
            return True
        if not cpp.event.message and re.fullmatch(r"[\w:']+", stripped):
            return True  # pieces of interleaved "terminate called ..." lines
        stream.cpp = None
        return False

    # -- where a native error happened ------------------------------------------------------
    def _native_site_line(self, stream: _Stream, stripped: str, contiguous: bool) -> bool:
        """ggml's CUDA check prints, under its error line, the function and source line it
        failed in, then the failing call: they become the error's frame (its crash site)."""
        found = stream.native
        assert found is not None
        frames = found.event.frames
        site = _GGML_SITE.match(stripped) if contiguous else None
        if site is not None and not frames:
            frames.append(Frame(_file_name(site["path"]), site["func"], int(site["line"]), path=site["path"]))
            return True
        stream.native = None
        if contiguous and frames and frames[-1].code is None and _NATIVE_CALL_LINE.match(stripped):
            frames[-1] = replace(frames[-1], code=stripped)
            return True
        return False

    # -- everything else -----------------------------------------------------------------------
    def _plain_line(self, line: LogLine, stream: _Stream, body: str, stripped: str) -> None:
        if stripped == _MPI_RULER or stream.help_block is not None:
            if self._help_block_line(line, stream, stripped):
                return
        if "ould not " in stripped or "nable to " in stripped or "ailed to " in stripped or "annot " in stripped:
            unloaded = _UNLOADED.search(stripped)
            if unloaded and len(self.unloaded) < _MAX_UNLOADED:
                self.unloaded.append((_line_as_error(line, stripped), unloaded["what"].strip(" '\"`")))
        terminate = _TERMINATE.search(stripped)
        if terminate:
            if stream.cpp is None or stream.cpp.event.message:
                if terminate["libcxx"]:
                    # a terminal copy flattened to one line goes on with the shell's report of the abort
                    said = terminate["said"] or ""
                    report = _JOB_REPORT.search(said)
                    message = (said[:report.start()] if report else said).strip()
                    stream.cpp_message_below = not message
                else:
                    inline = _WHAT_INLINE.search(stripped, terminate.end())  # a paste flattened to one line
                    message = inline["msg"].strip() if inline else ""
                event = ErrorEvent(exception=terminate["type"] or terminate["libcxx"], message=message,
                                   process=_label(line), line_number=line.number, kind="cpp")
                stream.cpp = Found(event, line.level, line.timestamp, line.record)
                self._add(stream, stream.cpp)
            return
        what = _WHAT.match(stripped)
        if what and stream.cpp is not None:
            stream.cpp.event.message = what["msg"].strip()
            return
        if _PROCESS_HEADER.match(stripped):
            return
        if stripped.startswith("Exception raised from ") and self._c10_message(line, stream, stripped):
            return
        if stripped.startswith("Exception caught at file:") and self._caught_what(line, stream):
            return
        if stripped.startswith("Exception ignored in"):
            stream.pending_header = stripped
            return
        frame = P.FRAME.match(body)
        if frame:
            # the excerpt starts inside a traceback: read it as one whose header is missing
            stream.frames = [Frame(frame["file"], (frame["func"] or "?").strip(), int(frame["line"]))]
            stream.indented_frames = body[:1] in (" ", "\t")
            stream.frame_indent = len(body) - len(body.lstrip())
            stream.tb_line = line
            stream.tb_header = stream.tb_intro = stream.tb_type = None
            stream.stack_dump = bool(P.DUMP_FRAME.match(body))
            return
        if _is_boilerplate(stripped):
            self._evidence(line, stripped)
            return  # a hint printed after an error (names it, never states it)
        if _RICH_FRAME.match(stripped):
            self._evidence(line, stripped)
            return  # a frame of Rich's traceback panel: an error's stack, its statement below the panel
        exc = P.EXCEPTION_LINE.match(stripped)
        if (exc and exc["msg"] is None and stripped.endswith(":") and not line.header
                and _looks_like_exception(exc["exc"], in_traceback=False)):
            stream.bare = Found(ErrorEvent(exception=exc["exc"], message="", process=_label(line),
                                           line_number=line.number, kind="python"),
                                line.level, line.timestamp, line.record)
            return
        warned = _WARNING_HEAD.match(stripped)
        if warned:  # `x.py:287: UserWarning: ` and the text on the next lines (it began with "\n")
            stream.bare = Found(ErrorEvent(exception=warned["exc"], message="", process=_label(line),
                                           line_number=line.number, kind="python"),
                                line.level, line.timestamp, line.record, mention=True)
            stream.bare_unindented = True
            return
        # "ValueError: msg" or a bare "AssertionError" outside a traceback (one-line logs,
        # `[rank0]: torch.OutOfMemoryError: ...`); other lines may match an error rule
        # (an excerpt that begins at the raise: the `raise X(` just above names X a class)
        raised = P.RAISE_CALL.match(stream.before) if exc else None
        is_exception = bool(exc) and _looks_like_exception(exc["exc"], in_traceback=raised is not None and (
            raised["exc"].rpartition(".")[2] == exc["exc"].rpartition(".")[2])) and (
            exc["msg"] is not None or stripped.endswith(("Error", "Exception")))
        if is_exception and exc["exc"] == "Error" and self._rule(line, stream, stripped):
            return  # `Error: ...`, how a CLI (Go, Rust) prints its failure: a known format says more
        if not is_exception and ("('" in stripped or '("' in stripped) and self._mention(line, stream, stripped, True):
            return  # `raised torch.OutOfMemoryError('CUDA out of memory ...')`: the repr bounds the message
        if not is_exception and stripped.startswith("future: <Task ") and self._task_report(line, stream, stripped):
            return
        if not is_exception:
            if self._rule(line, stream, stripped) or self._mention(line, stream, stripped):
                return
        else:
            message, process = _split_embedded_process(exc["msg"] or "", _label(line))
            event = ErrorEvent(exception=exc["exc"], message=message, process=process,
                               line_number=line.number, kind="python")
            if (not message and stream.before.startswith("assert ")
                    and exc["exc"].rpartition(".")[2] == "AssertionError"):
                # an excerpt cut inside a traceback: the statement printed just above a
                # bare AssertionError is its last frame's code (as in _assert_statement)
                event.message = stream.before
            found = Found(event, line.level, line.timestamp, line.record)
            self._chain(stream, found)
            self._add(stream, found)
            stream.continuation_of = found
            stream.continuation_lines = 0
            stream.continuation_layers = line.layers
            return
        if body[:1] in (" ", "\t"):
            return  # an indented line of an ERROR record (a frame's code, a message's tail): no statement
        if line.level in ("INFO", "DEBUG", "WARNING") and scan.first_rule(P.SYMPTOMS, stripped):
            self._evidence(line, stripped)  # a launcher reacting to a failure it does not state
            return
        if stripped[:1] == "[" and _BUILD_STEP.match(stripped):
            # a build tool's step echoed in an error's text (ninja's "[1/4] nvcc ..."): what
            # was run, not what went wrong (the compiler's own diagnostic says that)
            self._evidence(line, stripped)
            return
        if line.level in ("ERROR", "CRITICAL") and len(stripped) > 3 and _says_something(stripped) or (
                line.level not in ("INFO", "DEBUG", "WARNING") and scan.first_rule(P.SYMPTOMS, stripped)):
            # "[Errno 98] ..." is how an OSError prints itself: a logger that logged only
            # str(exc) (uvicorn's bind failure) still names its type
            exception = "OSError" if _OS_ERROR_TEXT.match(stripped) else LOGGED_ERROR
            event = ErrorEvent(exception=exception, message=stripped, process=_label(line),
                               line_number=line.number, kind="log_error")
            # a record that ends in a colon goes on below, unprefixed (Rust's tracing prints
            # the target and place, then the error chain a cause a line): as if wrapped
            found = Found(event, line.level, line.timestamp, line.record, wraps=line.wraps or stripped.endswith(":"))
            self._add(stream, found)
            if found.wraps:
                stream.continuation_of, stream.continuation_lines = found, 0
                stream.continuation_layers = line.layers
        elif line.level == "WARNING" and P.FAILURE_STATEMENT.search(stripped):
            warned = _line_as_error(line, stripped)
            warned.event.reason = "a warning that states a failure, where no error states one"
            # taken only where nothing states an error (kb.core.analyze): its level does not
            # set it below the wrappers then
            warned.level, warned.end_line = None, line.number + line.pieces - 1
            self.warned.append(warned)
        elif line.level is None and P.FAILURE_STATEMENT.search(stripped):
            if len(self.statement_templates) < 2:  # one statement, or more: all that counts
                self.statement_templates.add(message_template(stripped))
            if self.statement is None:
                self.statement = _line_as_error(line, stripped)
                self.statement.event.reason = "a line that states a failure in words, where no error states one"

    def _caught_what(self, line: LogLine, stream: _Stream) -> bool:
        """A C++ catch that prints what() and then, on a line of its own, where it caught it
        (ggml-sycl's SYCL_CHECK: "Native API failed. Native API returns: 20
        (UR_RESULT_ERROR_DEVICE_LOST)", then "Exception caught at file:..."): the line just
        above is the exception, what the macro's "SYCL error" after it reports. (Glued on one
        line, the exception-caught-at rule reads it.)"""
        message = stream.before
        if not message or not _says_something(message) or message.startswith(("Exception", "SYCL error")):
            return False
        event = ErrorEvent(exception="sycl::exception", message=message, process=_label(line),
                           line_number=line.number - 1, kind="cpp",
                           reason="a C++ catch printed this exception's what(), then where it caught it")
        self._add(stream, Found(event, line.level, line.timestamp, line.record))
        return True

    def _c10_message(self, line: LogLine, stream: _Stream, stripped: str) -> bool:
        """A c10::Error's text ends with 'Exception raised from f at file:line (most recent
        call first)', then its C++ stack: the line just above is the error's message even
        when the line that named the type (RuntimeError, DistBackendError, what()) was cut
        from the excerpt. Read as a traceback cut before its type; a message some error
        already holds is left alone."""
        message = stream.before
        if not message or not _C10_RAISED.match(stripped) or not _says_something(message):
            return False
        last = stream.last_found
        if last is not None and (message in last.event.message or stream.last_found_end >= line.number - 1):
            return False
        event = ErrorEvent(exception="", message=message, process=_label(line), line_number=line.number - 1,
                           truncated=True, kind="python",
                           reason="a C++ (c10) error's text above its 'Exception raised from' line, its type cut off")
        self._add(stream, Found(event, line.level, line.timestamp, line.record))
        return True

    def _rule(self, line: LogLine, stream: _Stream, stripped: str) -> bool:
        """The first error-line rule the line matches (a Python exception named before
        its text is taken instead); False when none does."""
        for rule in _ERROR_RULES.candidates(stripped):
            match = rule.pattern.search(stripped)
            if match:
                if not self._mention_before(line, stream, stripped, match.start()):
                    self._from_rule(line, stream, rule, match)
                return True
        return False

    def _from_rule(self, line: LogLine, stream: _Stream, rule: P.Rule, match: re.Match[str]) -> None:
        groups = match.groupdict()
        exception = _rule_exception(rule, groups)
        role = rule.role or "root"
        event = ErrorEvent(exception=exception, message=_rule_message(match), process=_label(line),
                           line_number=line.number, kind=rule.kind or "log_error", role=role,
                           reason=rule.why)
        if groups.get("site"):  # the library a native fault happened in: its crash site
            event.frames.append(Frame("<native>", groups["site"]))
        found = Found(event, line.level, line.timestamp, line.record)
        self._add(stream, found)
        if event.kind in _NATIVE_KINDS:
            stream.native = found
        if groups.get("cut") is not None and rule.closes is not None:
            found.cut = (rule.closes, [])
        if rule.kind == "python" or event.message.endswith(":") or found.cut is not None:
            # a message that ends in a colon goes on below (a Rust >= 1.73 panic's text), and
            # a cut one up to the line that closes it
            stream.continuation_of = found
            stream.continuation_lines = 0
            stream.continuation_layers = line.layers

    def _mention(self, line: LogLine, stream: _Stream, stripped: str, repr_only: bool = False) -> bool:
        """An exception named inside a log line, after any prefix: `[x.py:492] ValueError:
        msg`, `... failed with ImportError('msg')`, `/p/x.py:12: UserWarning: msg`."""
        match = P.EXCEPTION_MENTION.search(stripped)
        if match is None or (repr_only and match["repr"] is None):
            return False
        message = P.TRAILING_SOURCE.sub("", _mention_text(match)).strip()
        event = ErrorEvent(exception=match["exc"], message=message, process=_label(line),
                           line_number=line.number, kind="python",
                           reason="an exception named inside a log line")
        found = Found(event, line.level, line.timestamp, line.record, mention=True,
                      task_result=stripped.startswith("future: <Task ") and stripped[:match.start()].endswith("exception="),
                      lead=stripped[:match.start()])
        self._add(stream, found)
        if match["repr"] is None:
            stream.continuation_of = found
            stream.continuation_lines = 0
            stream.continuation_layers = line.layers
        return True

    def _help_block_line(self, line: LogLine, stream: _Stream, stripped: str) -> bool:
        """Open MPI prints its errors (show_help) between two rulers of 74 dashes, in words
        of its own, no level, no type: the text states the failure ("All nodes which are
        allocated for this job are already filled."). A block whose lines an error rule
        already read (a rank "exited on signal 9"), or a WARNING, is left to them."""
        if stripped != _MPI_RULER:
            if line.header or (line.level and stream.help_block):
                # a logger's record inside: not a help message (an excerpt that began inside
                # one took its closing ruler for an opening one)
                stream.help_found = _NOT_HELP
            elif line.level in ("WARNING", "INFO", "DEBUG"):
                stream.help_found = _HELP_NOT_ERROR  # "WARNING: Open MPI accepted a TCP connection ..."
            elif _PROGRESS.search(stripped):
                return False  # another writer's progress bar, redrawn in between: not its words
            if len(stream.help_block) < _MAX_HELP_LINES:
                stream.help_block.append(stripped)
            return False
        if stream.help_block is None or stream.help_found == _NOT_HELP:
            # (after lines that were no help message, this ruler opens one)
            stream.help_block, stream.help_found, stream.help_line = [], len(self.found), line.number + 1
            return True
        block, stream.help_block = stream.help_block, None
        if len(self.found) == stream.help_found and len(block) < _MAX_HELP_LINES:
            self._help_message(stream, block, line.number - 1, line,
                               "Open MPI's help message (show_help) between its rulers")
        return True

    def _help_message(self, stream: _Stream, block: list[str], line_number: int, line: LogLine | None,
                      reason: str) -> None:
        text = " ".join(" ".join(block).split())
        if not text:
            return
        event = ErrorEvent(exception="MPI error", message=text, line_number=line_number, kind="native",
                           process=_label(line) if line is not None else _key_label(stream.key), reason=reason)
        self._add(stream, Found(event, *((line.level, line.timestamp, line.record) if line is not None else ())))

    def _task_report(self, line: LogLine, stream: _Stream, stripped: str) -> bool:
        """asyncio's report of a failed task whose exception prints no repr (a remote
        exception's str(): rpyc's "exception=Triton Error [CUDA]: invalid argument" and
        its remote traceback below): the text is the error's message, its type unknown."""
        _, told, text = stripped.partition(" exception=")
        message = (text[:-1] if text.endswith(">") else text).strip()
        if not told or not message or P.EXCEPTION_MENTION.match(message):
            return False
        found = _line_as_error(line, message)
        found.event.reason = "asyncio's report of a task's exception"
        found.mention = found.task_result = True
        self._add(stream, found)
        return True

    def _mention_before(self, line: LogLine, stream: _Stream, stripped: str, position: int) -> bool:
        """A Python exception named before an error rule's text (`RuntimeError: Error in
        model execution: CUDA error: ...`) is what was raised: the rule's text is its
        message. Taken as the mention, then."""
        mention = P.EXCEPTION_MENTION.search(stripped)
        if (mention is None or mention.start() >= position or mention["repr"] is not None
                or mention["exc"].endswith("Warning")):
            return False
        return self._mention(line, stream, stripped)

    def _add(self, stream: _Stream, found: Found) -> None:
        stream.last_found, stream.last_found_end = found, stream.last_number
        if found.key is None:
            found.key = stream.key
        self.found.append(found)
        self.awaiting_info.setdefault(found.key, []).append(found)

    def _faulthandler_line(self, line: LogLine) -> bool:
        """faulthandler prints the crashing thread's stack after 'Fatal Python error':
        frames most recent first, until a blank line. abseil's handler prints native
        frames after '*** SIGSEGV received ***' the same way, and so does a handler that
        prints backtrace_symbols() (UCX's), and Android's crash dump: they join the signal."""
        body = line.body.strip()
        native = P.NATIVE_FRAME.match(body) if body[:1] in "@P" else None
        symbol = P.BACKTRACE_SYMBOL.match(body) if native is None and body[-1:] == "]" and "(" in body else None
        if native is None and symbol is None and body[:1] in _HEX_DIGITS:
            native = P.ADDRESS_SYMBOL.match(body)
            if native is None and (boost := P.BOOST_FRAME.match(body)) is not None:
                symbol = boost  # boost names the function whole, "(anonymous namespace)" and all
        elif native is None and symbol is None and body[:1] == "#" and " pc " in body[:12]:
            symbol = P.ANDROID_FRAME.match(body)
        if self.native_stack is None and (native is not None or symbol is not None or (
                body[:1] in _FRAME_NUMBER_START and P.NUMBERED_FRAME.match(body) is not None)):
            self._native_frame(line.number, body)
        if native is not None or symbol is not None:
            last = next((f for f in reversed(self.found[-3:]) if f.event.kind == "signal"), None)
            if last is not None and line.number - (last.event.line_number or 0) <= _MAX_FRAMES + _MAX_REGISTER_LINES:
                function = native_symbol(native["func"]) if native is not None else (symbol["func"] or "").strip()
                if function and len(last.event.frames) < _MAX_FRAMES:
                    last.event.frames.insert(0, Frame("<native>", function))
                return True
        if self.faulthandler is not None:
            frame = P.FRAME.match(body)
            if frame:
                if len(self.faulthandler.event.frames) < _MAX_FRAMES:
                    self.faulthandler.event.frames.insert(
                        0, Frame(frame["file"], (frame["func"] or "?").strip(), int(frame["line"])))
                return True
            self.faulthandler = None
            return not body
        if P.FAULTHANDLER_STACK.match(body):
            last = next((f for f in reversed(self.found[-5:]) if f.event.kind == "signal"), None)
            if last is not None and body.startswith("Current thread"):
                last.event.frames = []
                self.faulthandler = last
            else:
                self.faulthandler = Found(ErrorEvent("", ""))  # another thread's stack: skip it
            return True
        return False

    def _native_frame(self, number: int, body: str) -> None:
        last, frames, first, text = self._stack_run
        if not frames or number != last + 1:
            frames, first, text = 0, number, body[:160]
        self._stack_run = (number, frames + 1, first, text)
        if frames + 1 == NATIVE_STACK_FRAMES:
            self.native_stack = (first, text)


NATIVE_STACK_FRAMES = 3
_FRAME_NUMBER_START = frozenset("#0123456789")


def native_symbol(text: str) -> str:
    """The function of a native frame as abseil prints it: the symbol without its
    arguments, `(unknown)` when unsymbolized."""
    parts = [part for part in re.split(r"\s{2,}", text.strip()) if part and part != "(unknown)"]
    if not parts:
        return "(unknown)"
    symbol = parts[-1]
    return symbol.split("(", 1)[0].strip() or symbol


_ERROR_RULES = scan.RuleIndex(P.ERROR_LINES + P.KNOWN_MESSAGES)  # in that order
_SIGNALS = {9: "SIGKILL", 11: "SIGSEGV", 6: "SIGABRT", 15: "SIGTERM", 7: "SIGBUS", 2: "SIGINT", 4: "SIGILL", 1: "SIGHUP",
            8: "SIGFPE"}


def _rule_message(match: re.Match[str]) -> str:
    """A rule's text, whole: one that begins inside a value's repr and closes it
    (`DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")`) starts at the repr's name."""
    message = match["msg"]
    opener = _REPR_OPEN.search(match.string, 0, match.start("msg"))
    if opener is not None and message.count(")") > message.count("("):
        message = match.string[opener.start():match.end("msg")]
    return message.strip()


_REPR_OPEN = lazyre.compile(r"(?<![\w.:])[A-Za-z_][\w.:]*\($")


def _rule_exception(rule: P.Rule, groups: dict) -> str:
    """The kind an error-line rule names: the class the line names (demangled), else the
    rule's kind; a signal by its name (a launcher reporting how its child ended)."""
    exception = _demangle(groups.get("exc") or rule.exception or LOGGED_ERROR)
    return _signal_name(groups) if exception == "signal" else exception


def _signal_name(groups: dict) -> str:
    if groups.get("signame"):
        return _SIGNAL_WORDS[groups["signame"].lower()]
    if groups.get("signame2"):  # already the signal's name ("SIGSEGV: segmentation violation")
        return groups["signame2"]
    number = next(int(v) for k, v in groups.items() if k.startswith("signal") and v)
    return _SIGNALS.get(number, f"signal {number}")


_SIGNAL_WORDS = {"killed": "SIGKILL", "segmentation fault": "SIGSEGV", "aborted": "SIGABRT", "abort": "SIGABRT",
                 "iot instruction": "SIGABRT", "bus error": "SIGBUS", "floating point exception": "SIGFPE", "hangup": "SIGHUP",
                 "illegal hardware instruction": "SIGILL", "illegal instruction": "SIGILL",
                 "general protection fault": "SIGSEGV", "segfault": "SIGSEGV", "invalid opcode": "SIGILL",
                 "divide error": "SIGFPE"}


def _demangle(name: str) -> str:
    """A C++ class name as typeid().name() prints it (Itanium-mangled: `St13runtime_error`,
    `N5boost10wrapexceptINS_6system12system_errorEEE`) in source form; the common forms
    only (std::, nested names, template arguments, substitutions), else as it is."""
    if not name[:1].isdigit() and not name.startswith(("St", "N")):
        return name
    if len(name) > 400:
        return name
    try:
        text, end = _Demangler(name).type(0)
    except (IndexError, ValueError, RecursionError):
        return name
    return text if end == len(name) else name


class _Demangler:
    def __init__(self, text: str) -> None:
        self.text, self.subs = text, []

    def type(self, i: int) -> tuple[str, int]:
        text = self.text
        if text.startswith("St", i):
            name, i = self.source(i + 2)
            return self._sub(f"std::{name}"), i
        if text[i] == "S" and (text[i + 1] == "_" or text[i + 1].isdigit()):
            end = text.index("_", i + 1)
            index = 0 if end == i + 1 else int(text[i + 1:end], 36) + 1
            return self.subs[index], end + 1
        if text[i] == "N":
            parts: list[str] = []
            i += 1
            while text[i] != "E":
                if text[i] == "I":
                    args, i = self.args(i)
                    parts[-1] += args
                    self._sub("::".join(parts))
                elif text[i] == "S":
                    part, i = self.type(i)
                    parts.append(part)
                else:
                    part, i = self.source(i)
                    parts.append(part)
                    self._sub("::".join(parts))
            return "::".join(parts), i + 1
        return self.source(i)

    def args(self, i: int) -> tuple[str, int]:
        out = []
        i += 1
        while self.text[i] != "E":
            arg, i = self.type(i)
            out.append(arg)
        return "<" + ", ".join(out) + ">", i + 1

    def source(self, i: int) -> tuple[str, int]:
        digits = re.match(r"\d+", self.text[i:])
        if digits is None:
            raise ValueError(self.text)
        start = i + len(digits.group(0))
        return self.text[start:start + int(digits.group(0))], start + int(digits.group(0))

    def _sub(self, name: str) -> str:
        if len(name) > 600 or len(self.subs) > 100:
            raise ValueError("not a name an exception type has")  # back-references can grow without bound
        if name not in self.subs:
            self.subs.append(name)
        return name


_WORD_IN = lazyre.compile(r"[A-Za-z]{2}")
_FAILURE_WORDS = lazy(r"\b(?:timed out|[Ff]ailed|[Ee]rror|[Ee]xception|refused|denied|[Uu]nable to|[Cc]annot|[Cc]ould not|exceeded|out of memory"
                     r"|not writable|(?:was|is) a problem)\b")
_OBJECT_ERROR_NAME = lazyre.compile(r'^"name":\s*"(?P<exc>[A-Za-z_][\w.]*)",?$')
_OBJECT_ERROR_MESSAGE = lazyre.compile(r'^"message":\s*"(?P<msg>(?:[^"\\]|\\.)*)')


def _says_something(text: str) -> bool:
    """A line states something in words, besides its tags: not a record header cut inside
    its time (`ERROR 12-16 02:10:2`) or after or inside its locator (`[Rank 1]`, `[cor`) where an
    excerpt ends, nor a traceback's frame cut before its line number (`File "/x/vllm/v1/en`)."""
    return not text.startswith('File "') and bool(_WORD_IN.search(_TAGS.sub("", text)))


_TAGS = lazyre.compile(r"\[[^\[\]]*(?:\]|$)")
# ninja's step counter, then the compiler or linker it runs
_BUILD_STEP = lazyre.compile(r"\[\d+/\d+\] (?:\S*/)?(?:nvcc|hipcc|c\+\+|g\+\+|gcc|cc|clang\+\+|clang|ld|ar|cmake)(?:\s|$)")


# IPython's frame listing: "Cell In[7], line 4", numbered source lines, "----> 4 x = f()"
_IPYTHON_LISTING = lazy(r"^(?:Cell In\[\d*\], line \d+|-*> ?\d+ |\d+ |-{10,}$)")


# A class named by its module's dotted path (`triton.runtime.autotuner.OutOfResources`,
# `torch._dynamo.exc.Unsupported`): Python's traceback prints an exception so, whatever
# the class is called; a logger's or a config's name is not CamelCase at its end.
_QUALIFIED_CLASS = lazyre.compile(r"(?:[a-z_][a-z0-9_]*\.){2,}[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")


def _looks_like_exception(name: str, in_traceback: bool) -> bool:
    last = name.rsplit(".", 1)[-1]
    if P.EXCEPTION_NAME_OUTSIDE.search(last):
        return not last.endswith("Warning")
    if not in_traceback:
        return bool(_QUALIFIED_CLASS.fullmatch(name)) and not last.endswith("Warning")
    # inside a traceback any CamelCase class name can close it (KeyboardInterrupt, Unsupported);
    # capitals alone are a level word or a line cut short where an excerpt ends ("ER"), and
    # the traceback's own words are a line cut there too ("File")
    return bool(re.fullmatch(r"[A-Z]\w*[a-z]\w*(?:\([\w.]+\))?", last)) and last not in ("File", "Traceback")


def _embedded_lines(body: str) -> list[str]:
    """The lines of a multi-line message inside a JSON log record (TGI's `--json-output`,
    any JSON-lines logger): the record's string that holds the traceback, decoded; the
    record's other fields are not the message. Not a JSON record: the escapes undone in
    place."""
    if body.startswith("{"):
        try:
            record = json.loads(body)
        except (ValueError, RecursionError):
            record = None
        texts = list(_strings(record)) if isinstance(record, dict) else []
        text = next((t for t in texts if "Traceback" in t or 'File "' in t), None)
        if text and "\n" in text:
            return text.split("\n")
    return body.replace('\\"', '"').split(_ESCAPED_NEWLINE)


def _strings(value, depth: int = 0):
    if isinstance(value, str):
        yield value
    elif depth < 5 and isinstance(value, (dict, list)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item, depth + 1)


def _is_boilerplate(stripped: str) -> bool:
    return any(rule.pattern.search(stripped) for rule in P.MESSAGE_BOILERPLATE)


# tqdm's bar: "45% Completed | 29/64 [00:29<00:35, 1.0s/it]", "12%|█▏   | 1440/12000 [00:41<05:02"
_PROGRESS_BAR = lazy(r"(?<!\d)\d+/\d+ \[\d+:\d\d(?::\d\d)?<")
_WARNING_LINE = lazy(rf"^{_WARNED_AT}\w*(?:Warning|Error)\b")
# Lines another writer started: a record led by a timestamp (ISO, syslog, Go's log, a
# bracketed clock, logfmt's time=), a shell's trace (`set -x`) or prompt (behind the
# virtualenv's or conda's "(env) "; bash's "[user@host dir]$", PowerShell's), systemd's unit
# status, kubectl's end of stream, Windows' `pause` ("Press any key to continue . . ." in
# the console's language), NCCL's debug records ("host:pid:tid [dev] NCCL INFO"). None of
# them continues an exception's message.
_OTHER_WRITER = lazy(
    r"^(?:\[?\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d|\[?\d\d:\d\d:\d\d[.,\]]|[^.]{8,80}?\s?\. \. \.\s*$"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d |time=\S+ level="
    r"|\+{1,3} [\w./\[$\"'-]|(?:\([\w.-]+\) ?)*(?:[\w.-]+@[\w.-]+:\S*|\[[\w.-]+@[\w.-]+ [^\]]*\])[#$](?: |$)"
    r"|PS [A-Z]:\\[^>]*> |[\w@.-]+\.(?:service|scope): "
    r"|Stream closed EOF for |[\w.-]+:\d+:\d+ \[\d+\] NCCL [A-Z]+ )")


_FORMAT_RULES = scan.RuleIndex(tuple(r for r in P.ERROR_LINES if r.role in ("root", "confirmation") and r.kind != "python")
                               + P.PYTHON_MESSAGES)


def _states_error(stripped: str) -> bool:
    """Does the line state an error in a format of its own (a CUDA error, a segfault
    banner, a signal report), at its start (behind at most a short tag)? Then it is
    neither a message's next line nor a frame's code; a message that names a CUDA error
    further on is still that message."""
    for rule in _FORMAT_RULES.candidates(stripped):
        match = rule.pattern.search(stripped)
        if match is not None and match.start("msg" if "msg" in match.re.groupindex else 0) <= 16:
            return True
    return False


_HEADER_STATEMENT = lazy(r"^(?:[A-Z][\w ]{2,80}?|\w+ in [\w .-]+?) (?:while|when|during|for) [\w .()-]+?: (?P<msg>\S.{8,})$")


_NATIVE_KINDS = frozenset({"cuda", "cpp", "native"})
_WARNED_KEPT = 8
_CAUSE_NUMBER = lazyre.compile(r"^\d+: ")
_MPI_RULER = "-" * 74  # Open MPI's show_help frame (IPython's is 75 wide)
_NOT_HELP, _HELP_NOT_ERROR = -2, -1  # what an open help block turned out to be (else: errors found before it)
_MAX_HELP_LINES = 24  # a help message is short: more between two rulers is other output
_STATES_FAILURE = lazyre.compile(r"\b(?:fail(?:ed|s|ure)?|unable|errors?|abort(?:ed|ing)?|cannot|could not)\b", re.I)
_HEX_DIGITS = frozenset("0123456789abcdef")
_MAX_REGISTER_LINES = 12  # a crash report's banner and register dump before its frames
# ggml_cuda_error's report: "  current device: 0, in function alloc at /src/ggml-cuda.cu:529"
_GGML_SITE = lazy(r"current device: -?\d+, in function (?P<func>[\w:~]+) at (?P<path>\S+?):(?P<line>\d+)$")
_NATIVE_CALL_LINE = lazy(r"[A-Za-z_][\w:.>-]*\(.*\)$")


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _stated_in_header(header: str) -> str:
    """The exception's text when the logger printed it before its traceback, as in
    'Exception in worker W while processing method M: <str(e)>, Traceback ...': the
    message of a traceback the log cut before its last line."""
    match = _HEADER_STATEMENT.match(header.strip())
    return match["msg"].strip().rstrip(",") if match else ""


# a shell's or Python's prompt before a command: `$ pip list`, `(venv) $ nvidia-smi`, `>>> import vllm`
_SHELL_PROMPT = lazyre.compile(r"^(?:\([\w.-]+\) )?(?:\$|>>>) \S")


# The lines Python itself prints above a traceback it reports outside the main flow
# (threading's excepthook, asyncio's handlers, atexit, unraisable errors)
_PYTHON_REPORT_HEADS = ("Exception in thread ", "Exception in callback ", "Task exception was never retrieved",
                        "Exception ignored", "Error in atexit._run_exitfuncs", "Error in sys.excepthook")


def _starts_structure(stripped: str) -> bool:
    """A line that begins something new rather than continuing a message."""
    if stripped.startswith(("Traceback", 'File "', "terminate called", "Process ",
                            "stack backtrace:", "note: run with `RUST_BACKTRACE", '{"') + _PYTHON_REPORT_HEADS):
        return True  # ... or the next record of a JSON-lines log
    if stripped == '"""':
        return True  # the quotes a remote traceback's text closes with (multiprocessing's RemoteTraceback)
    if stripped[:1] in "$>(" and _SHELL_PROMPT.match(stripped):
        return True  # the next command a pasted terminal session ran
    if _WARNING_LINE.match(stripped) or _PROGRESS_BAR.search(stripped) or _OTHER_WRITER.match(stripped):
        return True  # a warning, a progress bar redrawn by another process, another writer's record
    if _CPP_END.match(stripped) or _TABLE_BORDER.match(stripped) or _PANEL_TOP.match(stripped):
        return True  # a native backtrace's frames, the border of an ASCII table or a drawn box
    if "terminat" in stripped and _TERMINATE.search(stripped):
        return True  # a C++ runtime's report of an uncaught exception, behind any words
    exc = P.EXCEPTION_LINE.match(stripped)
    if exc and exc["msg"] is not None and _looks_like_exception(exc["exc"], in_traceback=False):
        return True
    return _states_error(stripped)


_PYDANTIC_ERROR = lazy(r"^\s*(Value|Assertion) error, (.+?)(?: \[type=\w+_error\b.*)?$", re.M)


def _unwrap_validation_error(event: ErrorEvent) -> None:
    """pydantic wraps the ValueError a validator raised: 'ValidationError: 1 validation
    error for ModelConfig / Value error, <message> [type=value_error, ...]'. The person
    fixes the inner error, so that is what the event names."""
    if not event.exception.endswith("ValidationError") or " error, " not in event.message:
        return
    match = _PYDANTIC_ERROR.search(event.message)
    if match:
        event.reason = f"{event.exception}: {event.message.splitlines()[0]}"
        event.exception = "ValueError" if match.group(1) == "Value" else "AssertionError"
        event.message = match.group(2).strip()


_ESCAPE = lazyre.compile(r"\\([nt'\"\\])")
_ESCAPED = {"n": "\n", "t": " ", "'": "'", '"': '"', "\\": "\\"}


def _unescaped(text: str) -> str:
    """An exception's repr quotes its message as a Python literal (`RuntimeError('CUDA
    error: ...\\nCUDA kernel errors ...')`): the message is what str() prints."""
    return _ESCAPE.sub(lambda m: _ESCAPED[m[1]], text) if "\\" in text else text


def _mention_text(mention: re.Match[str]) -> str:
    """The message of an exception named in a line (P.EXCEPTION_MENTION): its repr's text
    as str() prints it, else what follows its name."""
    return _unescaped(mention["repr"]) if mention["repr"] is not None else (mention["msg"] or "")


def _unwrap_relayed_repr(event: ErrorEvent) -> None:
    """An exception whose message ends with another exception's repr on a line of its own
    relays that exception: Triton's CompilationError prints where in the kernel's source
    it failed ("at 12:4:", the source lines, a caret) and then the error it caught,
    `ValueError("type fp8e4nv not supported ...")`. That error is what a person fixes, and
    what a wrapper quoting str(e) shows of the same crash."""
    text = event.message.rstrip()
    if event.kind != "python" or "\n" not in text:
        return
    last = text.rsplit("\n", 1)[1].strip()
    match = P.EXCEPTION_MENTION.fullmatch(last)
    if match is not None and match["repr"] is not None:
        event.reason = f"{event.exception}: {event.message.splitlines()[0]}"
        event.frames = [*event.frames, *compiled_kernel(event.message)]
        event.exception, event.message = match["exc"], _unescaped(match["repr"])


# the wrapper's own clause before the error it carries says it failed ("Capture cuda graph failed")
_FAILED_CLAUSE = lazy(r".{3,}? (?:failed|error)(?: with(?: error| exception)?)?$")


def _unwrap_carried_error(event: ErrorEvent) -> None:
    """An exception raised with the error it caught in its message, type and all
    (SGLang's `Exception: Capture cuda graph failed: RuntimeError: Cannot call
    CUDAGeneratorImpl::current_seed during CUDA graph capture.`): the caught error is
    what a person fixes, the same crash its own traceback shows where the log has it."""
    if event.kind != "python" or event.truncated:
        return
    match = CARRIED_ERROR.match(event.message)
    if match is None or not match["lead"] or not _FAILED_CLAUSE.match(match["lead"]):
        return
    event.reason = event.reason or f"caught and carried in the message of {event.exception}: {match['lead']}"
    event.exception = match["exc"]
    event.message = event.message[match.start("msg"):]


# Triton's CompilationError: "at <line>:<col>:", then the kernel's source up to there; at
# the kernel's first line that is its `def`
_KERNEL_SOURCE = lazy(r"^at \d+:\d+:\n\s*def (?P<kernel>\w+)\(")
KERNEL_FILE = "<triton>"


def compiled_kernel(text: str) -> list[Frame]:
    """The kernel a compile error's text names, as the innermost frame: one message ("type
    fp8e4nv not supported in this architecture") from a MoE kernel, a block-scaled GEMM
    or an attention kernel is three crashes with three fixes, and the kernel tells them
    apart (kb.core.match). None named (an error inside the body): no frame."""
    match = _KERNEL_SOURCE.match(text.strip())
    return [Frame(file=KERNEL_FILE, function=match["kernel"], code=f"def {match['kernel']}(")] if match else []


_PROGRESS = lazy(r"\d+%\||[\d.]+\s*(?:it/s|s/it)\]")  # tqdm's bar or rate


def _intro(line: LogLine, stream: _Stream) -> str | None:
    """What the line just above a traceback header (`line`) says its error is, for a
    traceback cut before its exception line; None when it says nothing of it."""
    last = stream.last_found
    if (last is not None and last.event.kind == "log_error" and line.number - stream.last_found_end == 1
            and line.level is not None and last.record == line.record
            and not scan.first_rule(P.SYMPTOMS, last.event.message)):  # a wrapper's words say nothing
        # the first line of the record that prints the traceback, alone on its line:
        # `logger.exception(e)` prints str(e) there, other loggers what failed
        last.introduces = True
        return last.event.message
    if stream.before and _FAILURE_WORDS.search(stream.before) and (
            last is None or line.number - stream.last_found_end > 1):
        # the same process's line just above, not an error of its own (c10d's warning
        # that its store timed out, before the Python error that carries it)
        return stream.before[:1000]
    return None


def _tb_level(stream: _Stream) -> str | None:
    return stream.tb_line.level if stream.tb_line else None


def _assert_statement(event: ErrorEvent) -> None:
    """A bare `AssertionError` says nothing; the failing `assert` statement, which
    Python prints as the last frame's code, is what identifies it."""
    if (event.kind == "python" and not event.message.strip() and event.frames
            and event.exception.rpartition(".")[2] == "AssertionError"
            and (event.frames[-1].code or "").startswith("assert ")):
        event.message = event.frames[-1].code or ""


def quoted_error(text: str) -> ErrorEvent | None:
    """The error named inside a wrapper's message: an error-line rule on a line of the text
    it relays below its own, else an error-line rule or an exception mention searched after
    the wrapper's own words. A quote after "with error" that names neither is still the
    error's text, of no known type (vLLM's "Worker failed with error '{e}'" quotes str(e),
    the message without its type)."""
    untyped = None
    for line in text.split("\n")[1:]:  # the text it relays on the lines below ("raw error:")
        for rule in _ERROR_RULES.candidates(line):
            match = rule.pattern.search(line)
            if match and rule.role == "root":
                return ErrorEvent(exception=_rule_exception(rule, match.groupdict()),
                                  message=match["msg"].strip(), kind=rule.kind or "log_error")
    for quote in _QUOTE.finditer(text):
        inner, opened = text[quote.end():], quote.group(0)[-1:]
        end = _quote_end(inner, opened) if opened in ("'", '"') else None
        # the quoted part ends at its closing quote ("... 'X', please check ..."), else at the text's end
        inner = inner[:end] if end is not None else inner.rstrip("'\")")
        for rule in _ERROR_RULES.candidates(inner):
            match = rule.pattern.search(inner)
            if match and rule.role in ("root", "confirmation"):
                return ErrorEvent(exception=_rule_exception(rule, match.groupdict()),
                                  message=_unquoted(match["msg"], end is not None), kind=rule.kind or "log_error")
        mention = P.EXCEPTION_MENTION.search(inner)
        if mention is not None:
            message = _mention_text(mention)
            return ErrorEvent(exception=mention["exc"], message=_unquoted(message, end is not None), kind="python",
                              frames=compiled_kernel(inner))
        if untyped is None and opened in ("'", '"') and quote.group(0).lower().startswith("with error") \
                and len(inner.split()) >= _QUOTED_WORDS:
            cut = _CUT_REPR.match(inner.rstrip().rsplit("\n", 1)[-1]) if end is None else None
            if cut is not None:  # the text relays an exception's repr, and the log ends inside it
                return ErrorEvent(exception=cut["exc"], message=cut["msg"], kind="python", frames=compiled_kernel(inner))
            untyped = inner.strip()
    if untyped is not None:
        return ErrorEvent(exception=LOGGED_ERROR, message=untyped, kind="log_error")
    return None


def _unquoted(text: str, whole: bool) -> str:
    """A quoted error's text: one cut out at its closing quote keeps the quote marks of its
    own ('X' object has no attribute 'y'); one that runs to the text's end loses the marks
    that close the quote."""
    return text.strip() if whole else text.strip().rstrip("'\"")


_QUOTED_WORDS = 3  # a quoted text this long states an error ('None' or 'CUDA' does not)
# The repr of an exception on a line of its own, cut before its end: `ValueError("type fp8e4nv not`
_CUT_REPR = lazy(r"^(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\((?P<q>['\"])(?P<msg>[^\n]{8,})$")


def _quote_end(inner: str, quote: str) -> int | None:
    """Where a quoted text ends: at its quote mark followed by punctuation, a space or the
    end, the first one outside the brackets its line opened ('... are ('fp8e4b15', 'fp8e5')")'
    holds quote marks of its own; a kernel's source line above it may leave one open); the
    first such mark when none closes them all, None when there is none."""
    first = None
    for close in re.finditer(re.escape(quote) + r"(?=[,.;)]|\s|$)", inner):
        part = inner[inner.rfind("\n", 0, close.start()) + 1:close.start()]
        if (part.count("(") <= part.count(")") and part.count("[") <= part.count("]")
                and len(_INNER_QUOTE[quote].findall(part)) % 2 == 0):
            # (an odd quote mark before it, not an apostrophe: it closes a quote of the
            # text's own, str(e) of "'X' object has no attribute 'y'" or "No module named 'z'")
            return close.start()
        first = close.start() if first is None else first
    return first


# a quote mark that opens or closes a quote (an apostrophe stands between two letters)
_INNER_QUOTE = {mark: lazyre.compile(rf"(?<!\w){mark}|{mark}(?!\w)") for mark in ("'", '"')}


_QUOTE = lazyre.compile(r"(?:with error|error was|caused by|exception|Error|traceback\s*:)\s*[:=]?\s*['\"(]?", re.I)


def _line_as_error(line: LogLine, stripped: str) -> Found:
    """A log line without an exception, held as an error the root-cause choice may take."""
    event = ErrorEvent(exception=LOGGED_ERROR, message=stripped, process=_label(line),
                       line_number=line.number, kind="log_error")
    return Found(event, line.level, line.timestamp, line.record, key=line.key)


def _label(line: LogLine) -> str | None:
    """The process an error is reported for: the engine's label, else the capture's."""
    return line.process or line.stream


def _key_label(key: tuple | None) -> str | None:
    if not key:
        return None
    stream, process = key
    return process or stream


def _split_embedded_process(message: str, process: str | None) -> tuple[str, str | None]:
    """xoscar (xinference) embeds '[address=..., pid=...] ' in the message: a process label."""
    match = _XOSCAR.match(message)
    if match:
        return message[match.end():], process or match.group(0)[1:-2]
    return message, process
