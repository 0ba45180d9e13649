"""`kb run`, `kb submit`, `kb flush`: get crash logs from launch hosts into the knowledge
base without anyone remembering to upload them, and without ever losing one."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import click

from kb import textreport
from kb.core import textlog
from kb.client import hostinfo, settings
from kb.client.deliver import deliver, say
from kb.client.flush import EntryOutcome
from kb.client.flush import flush as flush_spool
from kb.client.redaction import redact_bytes
from kb.client.runner import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMEOUT, Runner
from kb.client.spool import Spool
from kb.client.upload import DEFAULT_TIMEOUT

EXIT_SUBMIT_SPOOLED = 75  # EX_TEMPFAIL: not delivered yet, kept in the spool for `kb flush`
DEFAULT_READY_TIMEOUT = 900.0
DEFAULT_HANG_TIMEOUT = 60.0
DEFAULT_KILL_GRACE = 10.0

server_option = click.option(
    "--server",
    envvar=settings.ENV_SERVER,
    default=settings.DEFAULT_SERVER,
    show_default=True,
    metavar="URL",
    help=f"Crash KB service base URL [env {settings.ENV_SERVER}].",
)
token_option = click.option(
    "--token",
    envvar=settings.ENV_TOKEN,
    default=None,
    metavar="TOKEN",
    help=f"API token, sent as 'Authorization: Bearer TOKEN' [env {settings.ENV_TOKEN}].",
)
timeout_option = click.option(
    "--timeout",
    "upload_timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds to wait for the service's answer to one upload.",
)


def _default_log_path(command: list[str]) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(command[0]).name)[:40].strip("-.") or "command"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return settings.log_dir() / f"{stamp}-{name}-{os.getpid()}.log"


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name} (exit status {128 - returncode})"
    return f"exited with {returncode}"


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@server_option
@token_option
@click.option("--ready-url", metavar="URL", help="Poll this URL; the command must answer 2xx before --ready-timeout.")
@click.option(
    "--ready-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="S",
    help=f"Seconds the command has to become ready (with --ready-url) [default: {DEFAULT_READY_TIMEOUT:g}].",
)
@click.option(
    "--hang-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_HANG_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds the command may keep running after a fatal wrapper line (0: never treat it as hung).",
)
@click.option(
    "--kill-grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_KILL_GRACE,
    show_default=True,
    metavar="S",
    help="Seconds between SIGTERM and SIGKILL when the command is stopped.",
)
@click.option(
    "--log",
    "log_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Where to save the output [default: a new file in ${settings.ENV_LOG_DIR} or the user data dir].",
)
@timeout_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    server: str,
    token: str | None,
    ready_url: str | None,
    ready_timeout: float | None,
    hang_timeout: float,
    kill_grace: float,
    log_file: Path | None,
    upload_timeout: float,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND; if it fails, upload its log and print the known root cause and fixes.

    Output passes through unchanged and is saved to a log file. The log is uploaded when
    the command exits non-zero, when it prints a fatal engine line (e.g. "Engine core
    initialization failed") and has not exited --hang-timeout seconds later, or when
    --ready-url has not answered within --ready-timeout seconds. kb exits with the
    command's exit code (128+N when killed by signal N) or 124 when it stopped a hung or
    never-ready command. Use `--` before COMMAND: kb run -- vllm serve MODEL ...
    """
    argv = list(command)
    if ready_timeout is not None and not ready_url:
        raise click.UsageError("--ready-timeout needs --ready-url")
    if ready_url and not ready_url.startswith(("http://", "https://")):
        raise click.UsageError(f"--ready-url must be an http:// or https:// URL, got {ready_url!r}")
    log_path = log_file or _default_log_path(argv)

    def make_runner(path: Path) -> Runner:
        runner = Runner(
            argv,
            path,
            ready_url=ready_url,
            ready_timeout=ready_timeout or DEFAULT_READY_TIMEOUT,
            hang_timeout=hang_timeout,
            kill_grace=kill_grace,
        )
        runner.open_log()
        return runner

    try:
        runner = make_runner(log_path)
    except OSError as exc:
        # The launch matters more than where its log goes: fall back to a temp file.
        fallback = Path(tempfile.gettempdir()) / f"kb-run-{os.getpid()}-{log_path.name}"
        say(f"cannot write the log to {log_path} ({exc.strerror or exc}); using {fallback}")
        log_path = fallback
        try:
            runner = make_runner(log_path)
        except OSError as again:
            say(f"cannot write the log to {log_path} either ({again.strerror or again})")
            raise SystemExit(1) from None
    try:
        runner.start()
    except FileNotFoundError:
        say(f"command not found: {argv[0]}")
        raise SystemExit(EXIT_NOT_FOUND) from None
    except PermissionError:
        say(f"permission denied: {argv[0]}")
        raise SystemExit(EXIT_NOT_EXECUTABLE) from None
    except OSError as exc:
        say(f"cannot run {argv[0]}: {exc}")
        raise SystemExit(EXIT_NOT_EXECUTABLE) from None

    def upload_log(log: Path | bytes, exit_code: int | None, failure: str) -> None:
        try:
            info = hostinfo.collect(argv, exit_code, failure)
        except Exception as exc:  # metadata is a bonus; the log must still go out
            say(f"could not collect host metadata: {exc}")
            info = hostinfo.HostInfo(command=shlex.join(argv), exit_code=exit_code, failure=failure)
        deliver(
            log,
            info.to_fields(),
            server=server,
            token=token,
            timeout=upload_timeout,
            source="kb run",
            kept_at=log_path,
            extra={"host": info.to_dict()},
            answer_to_stderr=True,
            redacted=True,  # the runner saves the log redacted
        )

    try:
        verdict = runner.wait()
        if verdict.kind in ("hang", "not_ready"):
            if verdict.kind == "hang":
                say(f"the command is still running {hang_timeout:g}s after a fatal line: {verdict.fatal_line}")
            else:
                say(f"{ready_url} did not answer 2xx within {runner.ready_timeout:g}s")
            say("uploading the log, then stopping the command")
            snapshot = None
            try:
                snapshot = runner.snapshot()
                upload_log(snapshot, None, verdict.kind)
            finally:
                status = runner.stop()
                if snapshot is not None:
                    snapshot.unlink(missing_ok=True)  # the spool keeps its own copy
            say(f"stopped the command (its exit status: {status}); exiting with {EXIT_TIMEOUT}")
            exit_code = EXIT_TIMEOUT
        else:
            runner.close()  # the complete log, before it is uploaded
            exit_code = verdict.exit_code if verdict.exit_code is not None else 1
            if verdict.kind == "failed":
                say(f"{argv[0]} {_how_it_ended(runner.process.returncode)}; uploading its log")
                upload_log(log_path, exit_code, "exit")
            if runner.group_alive():
                say(f"processes of the command are still running (process group {runner.process.pid})")
    finally:
        runner.close()
    say(f"log saved to {log_path}")
    raise SystemExit(exit_code)


@click.command()
@server_option
@token_option
@timeout_option
@click.option("--command", "command_line", metavar="TEXT", help="The command line that produced the log.")
@click.option("--exit-code", type=int, default=None, help="Its exit code.")
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON answer instead of the summary.")
@click.argument("log", type=click.Path(allow_dash=True, dir_okay=False, path_type=Path))
def submit(
    server: str,
    token: str | None,
    upload_timeout: float,
    command_line: str | None,
    exit_code: int | None,
    as_json: bool,
    log: Path,
) -> None:
    """Upload an existing crash LOG (`-` reads stdin) and print the root cause and fixes.

    Exit status: 0 answered, 1 refused (bad log, bad token) or unreadable, 75 the server
    was unreachable and the log waits in the spool for `kb flush`.
    """
    saved = False  # kb's own redacted copy of stdin, not a file of the user's
    if str(log) == "-":
        data = sys.stdin.buffer.read()
        if not data:
            say("nothing to upload: stdin was empty")
            raise SystemExit(1)
        log = settings.ensure_private_dir(settings.log_dir()) / f"{datetime.now():%Y%m%d-%H%M%S}-stdin-{os.getpid()}.log"
        log.write_bytes(redact_bytes(data))  # kept (redacted), whatever happens to the upload
        say(f"stdin saved to {log}")
        saved = True
    try:
        with log.open("rb") as handle:
            head = handle.read(textlog.SAMPLE)
            complete = not handle.read(1)
    except FileNotFoundError:
        say(f"no such file: {log}")
        raise SystemExit(1) from None
    except OSError as exc:
        say(f"cannot read {log}: {exc.strerror or exc}")
        raise SystemExit(1) from None
    try:  # refused here with the words the server would use, and nothing sent
        textlog.check_head(head, complete=complete)
    except textlog.LogRejected as exc:
        say(f"nothing uploaded: {log}: {exc}")
        raise SystemExit(1) from None

    fields: dict[str, str] = {}
    if command_line:
        fields["command"] = command_line
    if exit_code is not None:
        fields["exit_code"] = str(exit_code)
    who = hostinfo.reporter()
    if who:
        fields["reporter"] = who
    delivery = deliver(
        log,
        fields,
        server=server,
        token=token,
        timeout=upload_timeout,
        source="kb submit",
        kept_at=log.resolve(),
        as_json=as_json,
        redacted=saved,
    )
    raise SystemExit({"sent": 0, "spooled": EXIT_SUBMIT_SPOOLED}.get(delivery.status, 1))


def _print_outcome(outcome: EntryOutcome, server: str) -> None:
    if outcome.status == "delivered":
        base = settings.base_url(server)
        click.echo(f"sent {outcome.entry_id}: {textreport.upload_summary(outcome.answer or {}, base_url=base)}")
        click.echo(textreport.upload_report(outcome.answer or {}, base_url=base))
    elif outcome.status == "locked":
        click.echo(f"skipped {outcome.entry_id}: {outcome.error}")
    elif outcome.status == "skipped_rejected":
        click.echo(f"kept {outcome.entry_id}: refused earlier ({outcome.error}); resend with --retry-rejected")
    elif outcome.status == "rejected":
        click.echo(f"kept {outcome.entry_id}: refused by the server: {outcome.error}")
    else:
        click.echo(f"kept {outcome.entry_id}: {outcome.error}")


@click.command()
@server_option
@token_option
@timeout_option
@click.option("--retries", type=click.IntRange(min=0), default=4, show_default=True, help="Retries per log.")
@click.option(
    "--backoff",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    metavar="S",
    help="First retry delay; doubles on every retry (at most 60 s).",
)
@click.option("--retry-rejected", is_flag=True, help="Also resend logs the server refused (4xx) before.")
@click.option("--list", "list_only", is_flag=True, help="Only list the spooled logs.")
def flush(
    server: str,
    token: str | None,
    upload_timeout: float,
    retries: int,
    backoff: float,
    retry_rejected: bool,
    list_only: bool,
) -> None:
    """Send the logs waiting in the spool, each once, oldest first.

    A log leaves the spool only after the service confirmed it (2xx). Exit status: 0 when
    nothing is left to send, 1 when logs remain (server unreachable, or refused: see the
    messages).
    """
    spool = Spool(settings.spool_dir())
    entries = spool.entries()
    if list_only:
        for entry in entries:
            try:
                meta = entry.read_meta()
            except (OSError, ValueError) as exc:
                click.echo(f"{entry.id}  unreadable metadata: {exc}")
                continue
            command_line = (meta.get("fields") or {}).get("command") or "-"
            if meta.get("rejected"):
                state = f"refused: {meta.get('last_error')}"
            else:
                state = f"{meta.get('attempts', 0)} attempt(s)"
            click.echo(f"{entry.id}  {meta.get('source', '?')}  {state}  {command_line[:80]}")
        say(f"{len(entries)} log(s) in {spool.root}")
        return
    if not entries:
        say(f"the spool is empty ({spool.root})")
        return

    started = time.monotonic()
    report = flush_spool(
        spool,
        server=server,
        token=token,
        retries=retries,
        backoff=backoff,
        timeout=upload_timeout,
        retry_rejected=retry_rejected,
        on_outcome=lambda outcome: _print_outcome(outcome, server),
    )
    sent = report.count("delivered")
    say(f"{sent} sent, {report.remaining} left in {spool.root} ({time.monotonic() - started:.1f}s)")
    if report.aborted:
        say(f"stopped early: {report.aborted}")
    unresolved = report.remaining - report.count("locked")
    raise SystemExit(1 if unresolved > 0 else 0)
