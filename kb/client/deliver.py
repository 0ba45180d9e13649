"""Upload a log now, or keep it in the spool for `kb flush`: the one place that decides,
shared by `kb run` and `kb submit`, so both keep the same promise: a log is either
confirmed by the service, or on disk with its path printed.

Nothing leaves here unredacted: the fields and the metadata always go through the core's
rules, and the log too unless the caller redacted it already (`kb run` saves it so). A
log file of the user's (`kb submit LOG`) is not changed: a redacted copy is sent, and
moved into the spool when the service cannot take it."""

from __future__ import annotations

import io
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kb import textreport
from kb.client import excerpt, settings
from kb.client.redaction import redact_bytes, redact_data, redact_fields, redacted_copy
from kb.client.spool import Spool, SpoolEntry, new_idempotency_key
from kb.client.upload import UploadResult, upload


@dataclass(slots=True)
class Delivery:
    status: str  # sent | spooled | refused (4xx) | kept (spool unwritable, log on disk) | lost
    result: UploadResult
    entry: SpoolEntry | None = None


def say(message: str) -> None:
    """kb's own messages go to stderr: stdout may be the wrapped command's, or a pipe."""
    click.echo(f"kb: {message}", err=True)


def deliver(
    log: Path | bytes,
    fields: dict[str, str],
    *,
    server: str,
    token: str | None,
    timeout: float,
    source: str,
    kept_at: Path | None,
    extra: dict[str, Any] | None = None,
    answer_to_stderr: bool = False,
    as_json: bool = False,
    redacted: bool = False,
) -> Delivery:
    """Send once; print the answer, or spool the log and say where it is. `redacted`:
    the log's secrets are masked already (else a redacted copy is made and sent)."""
    fields = redact_fields(fields)
    extra = redact_data(extra or {})
    if redacted or isinstance(log, bytes):
        return _deliver(log if redacted else redact_bytes(log), fields, server=server, token=token,
                        timeout=timeout, source=source, kept_at=kept_at, extra=extra,
                        answer_to_stderr=answer_to_stderr, as_json=as_json, copy=False)
    spool_root = settings.spool_dir()
    try:
        copy = redacted_copy(log, [spool_root, Path(tempfile.gettempdir())])
    except OSError as exc:
        say(f"could not write a redacted copy of {log}: {exc}; nothing uploaded")
        return Delivery("kept" if kept_at is not None else "lost",
                        UploadResult("transient", error=f"no redacted copy: {exc}"))
    try:
        return _deliver(copy, fields, server=server, token=token, timeout=timeout, source=source,
                        kept_at=kept_at, extra=extra, answer_to_stderr=answer_to_stderr,
                        as_json=as_json, copy=True)
    finally:
        copy.unlink(missing_ok=True)  # moved into the spool, or sent


def _deliver(
    log: Path | bytes,
    fields: dict[str, str],
    *,
    server: str,
    token: str | None,
    timeout: float,
    source: str,
    kept_at: Path | None,
    extra: dict[str, Any],
    answer_to_stderr: bool,
    as_json: bool,
    copy: bool,
) -> Delivery:
    """One upload of `log`: a log over the upload limit goes as its head and tail, and a
    413 from a service with a lower limit gets one smaller excerpt."""
    whole, made = log, []  # the excerpts made here: removed unless moved into the spool
    if isinstance(log, Path) and not excerpt.fits(log, settings.upload_limit()):
        log, copy = _excerpt(log, settings.upload_limit()), True
        made.append(log)
    key = new_idempotency_key()
    try:
        try:
            result = upload(server, log, fields, token=token, idempotency_key=key, timeout=timeout,
                            filename="crash.log")
            if result.http_status == 413 and isinstance(whole, Path):
                # the service's limit is below ours (its KB_MAX_UPLOAD_MB): a smaller excerpt
                size = log.stat().st_size if isinstance(log, Path) else len(log)
                log, copy = _excerpt(whole, max(size // 8, 64 * 1024)), True
                made.append(log)
                result = upload(server, log, fields, token=token, idempotency_key=key, timeout=timeout,
                                filename="crash.log")
        except KeyboardInterrupt:  # Ctrl-C while uploading: keep the log for `kb flush`
            result = UploadResult("transient", error="upload interrupted")
        return _after_upload(result, log, fields, key, server=server, source=source, kept_at=kept_at,
                             extra=extra, answer_to_stderr=answer_to_stderr, as_json=as_json, copy=copy)
    finally:
        for path in made:
            path.unlink(missing_ok=True)


def _excerpt(log: Path, limit: int) -> Path:
    cut = excerpt.excerpt(log, limit, directory=log.parent)
    say(f"the log ({log.stat().st_size} bytes) is larger than the upload limit ({limit} bytes, "
        f"{settings.ENV_UPLOAD_MAX_MB}): sending its head and tail, marked where cut")
    return cut


def _after_upload(result: UploadResult, log: Path | bytes, fields: dict[str, str], key: str, *,
                  server: str, source: str, kept_at: Path | None, extra: dict[str, Any],
                  answer_to_stderr: bool, as_json: bool, copy: bool) -> Delivery:
    if result.ok:
        if result.answer is not None and as_json:
            click.echo(json.dumps(result.answer, indent=2), err=answer_to_stderr)
        elif result.answer is not None:
            click.echo(textreport.upload_report(result.answer, base_url=settings.base_url(server)),
                       err=answer_to_stderr, nl=False)
        else:
            say(f"the server accepted the log (HTTP {result.http_status}) but sent no JSON answer")
        _mention_spool()
        return Delivery("sent", result)

    if not result.keep_for_later:
        say(f"the server refused the log: {result.error}")
        if kept_at is not None:
            say(f"the log is kept at {kept_at}")
        return Delivery("refused", result)

    say(f"could not upload the log: {result.error}")
    advice = _local_advice(log)
    if advice:
        say("meanwhile, what the bundled knowledge base knows of this crash:")
        click.echo(advice, err=answer_to_stderr)
    spool = Spool(settings.spool_dir())
    meta: dict[str, Any] = {"server": server, "first_error": result.error,
                            "original_log": str(kept_at) if kept_at else None, "redacted": True}
    meta.update(extra)
    try:
        entry = spool.add(log, fields, idempotency_key=key, source=source, extra=redact_data(meta), move=copy)
    except OSError as exc:
        say(f"could not write to the spool {spool.root}: {exc}")
        if kept_at is not None:
            say(f"the log is kept at {kept_at}; send it later with: kb submit {kept_at}")
        return Delivery("lost" if kept_at is None else "kept", result)
    say(f"saved to the spool: {entry.path}")
    say("send it once the server is reachable with: kb flush")
    return Delivery("spooled", result, entry)


def _local_advice(log: Path | bytes) -> str | None:
    """The offline answer (kb analyze's) for a log the service did not receive; None
    when the log cannot be read or is no log at all (the spool keeps it either way)."""
    from kb.commands.analysis import analyze_stream, local_advice

    try:
        if isinstance(log, Path):
            with log.open("rb") as stream:
                result = analyze_stream(stream)
        else:
            result = analyze_stream(io.BytesIO(log))
    except (OSError, ValueError):  # unreadable, or refused as empty or binary
        return None
    return local_advice(result, root_cause=True)


def _mention_spool() -> None:
    try:
        waiting = len(Spool(settings.spool_dir()).entries())
    except OSError:
        return
    if waiting:
        say(f"{waiting} earlier log(s) wait in the spool {settings.spool_dir()}; send them with: kb flush")
