"""Run a launch command as `kb run` does: in its own process group, its output passed
through to the terminal unchanged while a copy goes to a log file, watching for the
three ways a launch fails: a non-zero exit, a fatal line followed by a hang, and a
server that never becomes ready.

Why each choice:
- Own process group: engines fork workers (vLLM's EngineCore and VllmWorker processes,
  torchrun's ranks); stopping "the command" must stop all of them, and a Ctrl-C must
  reach them through us so we can still see how they end.
- A reader thread keeps the pipes drained at all times, also while we upload a hung
  server's log, so the child never blocks on a full pipe and the terminal stays live.
- The terminal gets the raw bytes (progress bars keep animating); the saved log keeps
  what a terminal would finally show: of a line rewritten with `\\r`, its last state.
- The saved log is redacted line by line as it is written (kb.client.redaction): it is
  what gets uploaded and spooled, and a log file with an HF token in it is a leak too.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx

from kb.client.redaction import LineRedactor

# Lines an engine's wrapper prints once the real error already happened. After one of
# them the run is over even if the process does not exit (and it often does not).
FATAL_PATTERNS: tuple[str, ...] = (
    "Engine core initialization failed",  # vLLM v1 EngineCore died during start-up
    "WorkerProc initialization failed",  # vLLM v1 multiproc executor worker died
    "Engine process failed to start",  # vLLM v0 engine process
    "EngineDeadError",  # vLLM: engine died while serving
    "scheduler is dead",  # SGLang: "Rank 0 scheduler is dead"
    "ChildFailedError",  # torch.distributed.elastic (torchrun)
)

EXIT_TIMEOUT = 124  # hung after a fatal line, or never ready (as GNU timeout)
EXIT_NOT_EXECUTABLE = 126  # shell convention
EXIT_NOT_FOUND = 127  # shell convention
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
MAX_LINE = 1 << 20  # a "line" longer than this is saved in pieces
READ_SIZE = 1 << 16
DRAIN_SECONDS = 2.0  # output still arriving after the command exited (its workers' last words)


def exit_status(returncode: int) -> int:
    """Shell convention: a death by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class LineCollapser:
    """Split a byte stream into lines for the saved log. `\\r` rewinds the line (progress
    bars): only the last non-empty state of the line is kept. Lines end with `\\n`."""

    _BREAK = re.compile(rb"[\r\n]")

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        self._emit = emit
        self._segment = bytearray()
        self._last = b""  # last non-empty state of the current line, before a \r

    def feed(self, data: bytes) -> None:
        start = 0
        for match in self._BREAK.finditer(data):
            self._segment += data[start : match.start()]
            start = match.end()
            if match.group() == b"\r":
                if self._segment:
                    self._last = bytes(self._segment)
                    self._segment.clear()
            else:
                self._emit((bytes(self._segment) or self._last) + b"\n")
                self._segment.clear()
                self._last = b""
        self._segment += data[start:]
        if len(self._segment) > MAX_LINE:
            self._emit(bytes(self._segment))
            self._segment.clear()
            self._last = b""

    def pending(self) -> bytes:
        """What the current unfinished line shows right now (not consumed)."""
        return bytes(self._segment) or self._last

    def close(self) -> None:
        rest = self.pending()
        if rest:
            self._emit(rest + b"\n")
        self._segment.clear()
        self._last = b""


class _LogSink:
    """The saved log: complete lines of both streams in arrival order, plus a watch for
    fatal wrapper lines."""

    def __init__(self, path: Path, patterns: tuple[str, ...]) -> None:
        self.path = path
        self._file = path.open("wb")
        self._lock = threading.Lock()
        self._patterns = tuple(p.encode() for p in patterns)
        self.fatal_line: str | None = None
        self.fatal_at: float | None = None
        # One redactor a stream: a PEM key's lines come in order on the stream that
        # printed it, whatever the other stream interleaves.
        self._redactors = {name: LineRedactor() for name in ("stdout", "stderr")}
        self.collapsers = {name: LineCollapser(self._writer(name)) for name in ("stdout", "stderr")}

    def _writer(self, stream: str) -> Callable[[bytes], None]:
        redactor = self._redactors[stream]
        return lambda line: self._write_line(redactor.line(line))

    def _write_line(self, line: bytes) -> None:
        # Called with self._lock held (from feed/close below); `line` is redacted.
        self._file.write(line)
        if self.fatal_at is None and any(p in line for p in self._patterns):
            self.fatal_at = time.monotonic()
            self.fatal_line = line.decode("utf-8", "replace").strip()

    def feed(self, stream: str, data: bytes) -> None:
        with self._lock:
            self.collapsers[stream].feed(data)

    def snapshot(self) -> Path:
        """The log so far, including lines not finished yet, copied in chunks to a new
        file beside it (the caller removes it): the log may be gigabytes, memory is not."""
        with self._lock:
            self._file.flush()
            handle, name = tempfile.mkstemp(prefix=".kb-snapshot-", suffix=".log", dir=self.path.parent)
            with os.fdopen(handle, "wb") as out, self.path.open("rb") as log:
                shutil.copyfileobj(log, out, 1 << 20)
                for stream, collapser in self.collapsers.items():
                    pending = collapser.pending()
                    if pending:
                        out.write(self._redactors[stream].peek(pending + b"\n"))
            return Path(name)

    def close(self) -> None:
        with self._lock:
            if self._file.closed:
                return
            for collapser in self.collapsers.values():
                collapser.close()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


class _Pump(threading.Thread):
    """Copy the child's pipes to the terminal and the log until both close (or until told
    to stop after a drain period: orphaned workers may hold the pipes open forever)."""

    def __init__(self, pipes: dict[str, BinaryIO], terminals: dict[str, BinaryIO], sink: _LogSink) -> None:
        super().__init__(name="kb-run-pump", daemon=True)
        self._pipes = pipes
        self._terminals = dict(terminals)
        self._sink = sink
        self._deadline: float | None = None

    def stop_after(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    def _to_terminal(self, name: str, data: bytes) -> None:
        terminal = self._terminals.get(name)
        if terminal is None:
            return
        try:
            terminal.write(data)
            terminal.flush()
        except (OSError, ValueError):  # terminal gone (closed pipe): keep saving the log
            self._terminals.pop(name, None)

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        for name, pipe in self._pipes.items():
            selector.register(pipe.fileno(), selectors.EVENT_READ, name)
        try:
            while selector.get_map():
                if self._deadline is not None and time.monotonic() > self._deadline:
                    break
                for key, _ in selector.select(timeout=0.1):
                    try:
                        data = os.read(key.fd, READ_SIZE)
                    except OSError:
                        data = b""
                    if not data:
                        selector.unregister(key.fd)
                        continue
                    self._to_terminal(key.data, data)
                    self._sink.feed(key.data, data)
        finally:
            selector.close()
            for pipe in self._pipes.values():
                pipe.close()


class _ReadyPoller(threading.Thread):
    """GET the ready URL until it answers 2xx (e.g. vLLM's /health or /v1/models)."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(name="kb-run-ready", daemon=True)
        self.url = url
        self.interval = interval
        self.ready = threading.Event()
        self.stopped = threading.Event()

    def run(self) -> None:
        timeout = httpx.Timeout(max(1.0, min(5.0, self.interval * 2)))
        # trust_env=False: a proxy from the environment must not answer for a local server.
        with httpx.Client(timeout=timeout, follow_redirects=True, trust_env=False) as client:
            while not self.stopped.is_set():
                try:
                    if client.get(self.url).is_success:
                        self.ready.set()
                        return
                except Exception:  # not up yet (refused, reset, timeout): keep polling
                    pass
                self.stopped.wait(self.interval)


@dataclass(slots=True)
class Verdict:
    kind: str  # success | failed | interrupted | hang | not_ready
    exit_code: int | None  # the command's own status (128+N for signal N); None while it runs
    fatal_line: str | None = None
    signal: int | None = None  # the first signal forwarded to the command


class Runner:
    def __init__(
        self,
        command: list[str],
        log_path: Path,
        *,
        ready_url: str | None = None,
        ready_timeout: float = 900.0,
        ready_interval: float = 2.0,
        hang_timeout: float = 60.0,
        kill_grace: float = 10.0,
        patterns: tuple[str, ...] = FATAL_PATTERNS,
        terminals: dict[str, BinaryIO] | None = None,
    ) -> None:
        self.command = command
        self.log_path = log_path
        self.ready_url = ready_url
        self.ready_timeout = ready_timeout
        self.ready_interval = ready_interval
        self.hang_timeout = hang_timeout
        self.kill_grace = kill_grace
        self.patterns = patterns
        self.terminals = (
            terminals if terminals is not None else {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self._sink: _LogSink | None = None
        self._pump: _Pump | None = None
        self._poller: _ReadyPoller | None = None
        self._old_handlers: dict[int, object] = {}
        self._signals: list[int] = []
        self._kill_at: float | None = None

    # -- life cycle -------------------------------------------------------------------

    def open_log(self) -> None:
        """Create the log file. Raises OSError when it cannot be written."""
        self.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._sink = _LogSink(self.log_path, self.patterns)

    def start(self) -> None:
        """Start the command. Raises OSError (FileNotFoundError, PermissionError) when it
        cannot be executed; nothing is left running then."""
        if self._sink is None:
            self.open_log()
        assert self._sink is not None
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")  # Python engines: lines arrive as printed
        # A background process group reading a terminal would be stopped (SIGTTIN).
        stdin = subprocess.DEVNULL if sys.stdin is not None and sys.stdin.isatty() else None
        self._install_handlers()  # before the fork: a Ctrl-C right now must not be lost
        try:
            self.process = subprocess.Popen(
                self.command,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                process_group=0,
            )
        except OSError:
            self._restore_handlers()
            self._sink.close()
            raise
        if self._signals:  # arrived while the command was being started
            self._kill_group(self._signals[0])
        self.started_at = time.monotonic()
        assert self.process.stdout is not None and self.process.stderr is not None
        self._pump = _Pump({"stdout": self.process.stdout, "stderr": self.process.stderr}, self.terminals, self._sink)
        self._pump.start()
        if self.ready_url:
            self._poller = _ReadyPoller(self.ready_url, self.ready_interval)
            self._poller.start()

    def wait(self) -> Verdict:
        """Block until the command exits, hangs after a fatal line, or misses readiness."""
        assert self.process is not None and self._sink is not None
        while True:
            returncode = self.process.poll()
            if returncode is not None:
                return self._exited(returncode)
            now = time.monotonic()
            if self._signals:
                if self._kill_at is not None and now >= self._kill_at:
                    self._kill_group(signal.SIGKILL)
                    self._kill_at = None
            else:
                fatal_at = self._sink.fatal_at
                if fatal_at is not None and self.hang_timeout > 0 and now - fatal_at >= self.hang_timeout:
                    return Verdict("hang", None, fatal_line=self._sink.fatal_line)
                if (
                    self._poller is not None
                    and not self._poller.ready.is_set()
                    and now - self.started_at >= self.ready_timeout
                ):
                    return Verdict("not_ready", None, fatal_line=self._sink.fatal_line)
            time.sleep(0.05)

    def snapshot(self) -> Path:
        assert self._sink is not None
        return self._sink.snapshot()

    def stop(self) -> int:
        """Stop the whole process group: SIGTERM, then SIGKILL after the grace period.
        Returns the command's exit status."""
        assert self.process is not None
        self._kill_group(signal.SIGTERM)
        try:
            self.process.wait(timeout=self.kill_grace)
        except subprocess.TimeoutExpired:
            self._kill_group(signal.SIGKILL)
            self.process.wait()
        self._kill_group(signal.SIGKILL)  # workers that outlived the leader
        return exit_status(self.process.returncode)

    def close(self) -> None:
        """Drain what is left of the output, save the log, give the signals back."""
        self._restore_handlers()
        if self._poller is not None:
            self._poller.stopped.set()
        if self._pump is not None:
            self._pump.stop_after(DRAIN_SECONDS)
            self._pump.join(DRAIN_SECONDS + 5)
        if self._sink is not None:
            self._sink.close()

    def group_alive(self) -> bool:
        """Whether processes of the command's group outlived it (orphaned workers)."""
        if self.process is None:
            return False
        try:
            os.killpg(self.process.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    # -- internals --------------------------------------------------------------------

    def _exited(self, returncode: int) -> Verdict:
        status = exit_status(returncode)
        first_signal = self._signals[0] if self._signals else None
        if self._signals:
            kind = "interrupted"  # the user (or a scheduler) stopped it: not a crash
        elif status == 0:
            kind = "success"
        else:
            kind = "failed"
        self._restore_handlers()  # from now on Ctrl-C interrupts kb itself (e.g. the upload)
        assert self._sink is not None
        return Verdict(kind, status, fatal_line=self._sink.fatal_line, signal=first_signal)

    def _kill_group(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _forward(self, signum: int, _frame: object) -> None:
        self._signals.append(signum)
        if len(self._signals) >= 3:  # third Ctrl-C: the user means it
            self._kill_group(signal.SIGKILL)
            return
        self._kill_group(signum)
        if self._kill_at is None:
            self._kill_at = time.monotonic() + self.kill_grace

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in FORWARDED_SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, self._forward)

    def _restore_handlers(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._old_handlers.clear()
