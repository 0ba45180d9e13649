"""Read an uploaded log from a request: multipart (field `log`), a raw text/plain or gzip
body. The size limit is checked on Content-Length before anything is read and again
while the body streams in, so an oversized upload costs no more than the limit. The API
hands the log's bytes to a LogBody (kb.web.logbody) as they arrive: a large or gzip log
is analyzed as it streams in instead of being held whole."""

from __future__ import annotations

from urllib.parse import parse_qs

from litestar import Request
from multipart import MultipartSegment, ParserError, ParserLimitReached, PushMultipartParser

from kb.services.errors import InvalidInput, TooLarge, UnsupportedMediaType
from kb.services.streamupload import StreamedLog
from kb.services.views import OVERRIDE_FIELDS
from kb.web.budget import Reservation
from kb.web.logbody import READ_ROOM, STREAM_AFTER, STREAM_ROOM, LogBody

MULTIPART_SLACK = 256 * 1024  # boundaries, headers and the override fields
MAX_PARTS = 64
# Memory a body takes while it is read, per byte (kb.web.budget): READ_ROOM, kept with
# the streaming constants in kb.web.logbody. While it is analyzed, beyond the body: the
# prepared text and its redacted copy (one 100 MB upload measures +200 MB, body included).
# A gzip body kept whole (the UI's form) reserves more once it shows its magic
# (kb.web.api.upload_answer): it may inflate to the upload limit.
ANALYSIS_ROOM = 1
INFLATE_ROOM = 2  # per byte of the upload limit: an inflating output and its one copy
RAW_TYPES = {"text/plain", "text/x-log", "application/gzip", "application/x-gzip",
             "application/octet-stream", ""}
ACCEPTED = "multipart/form-data (field 'log'), text/plain, application/gzip"


def _too_large(limit: int) -> TooLarge:
    return TooLarge(f"the upload is larger than {limit // (1024 * 1024)} MiB (KB_MAX_UPLOAD_MB)")


def _content_type(request: Request) -> tuple[str, dict[str, str]]:
    from litestar._multipart import parse_content_header

    return parse_content_header(request.headers.get("content-type", ""))


def _check_length(request: Request, limit: int) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    try:
        length = int(raw)
    except ValueError:
        raise InvalidInput(f"invalid Content-Length {raw!r}") from None
    if length > limit:
        raise _too_large(limit)
    return length


async def _admit(request: Request, limit: int, held: Reservation | None, streams: bool = False) -> None:
    """Refuse a body over `limit` by its Content-Length, and when the length is known,
    reserve the memory the whole upload will take before reading a byte of it (when
    the log `streams`, what it takes until it streams, and the stream's room)."""
    length = _check_length(request, limit)
    if held is not None and length is not None:
        if streams and length > STREAM_AFTER:
            await held.reserve((READ_ROOM + ANALYSIS_ROOM) * STREAM_AFTER + STREAM_ROOM)
        else:
            await held.reserve((READ_ROOM + ANALYSIS_ROOM) * length)


async def _read_body(request: Request, limit: int, held: Reservation | None = None) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        if held is not None:
            await held.take(READ_ROOM * len(chunk))
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)
    return bytes(body)


async def _read_multipart(request: Request, boundary: str, limit: int,
                          wanted: frozenset[str] = frozenset(OVERRIDE_FIELDS),
                          log_field: str = "log", long_fields: frozenset[str] = frozenset(),
                          held: Reservation | None = None, body: LogBody | None = None
                          ) -> tuple[bytes | StreamedLog | None, dict[str, str]]:
    """The log (field `log_field`) and the `wanted` text fields of a multipart body, read
    as it streams in: the log and `long_fields` up to `limit`, any other field up to 64 KiB.
    With a `body`, the log's bytes go there as they arrive (it takes their memory from
    the budget)."""
    fields: dict[str, str] = {}
    log: bytes | StreamedLog | None = None
    files: list[str] = []
    received = 0
    current: MultipartSegment | None = None
    pieces: list[bytes] = []  # of the current segment, joined once at its end
    size = 0
    try:
        with PushMultipartParser(boundary, max_segment_count=MAX_PARTS,
                                 max_segment_size=limit + 1) as parser:
            # request.stream() ends with b"", which tells the parser the input ended.
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit + MULTIPART_SLACK:
                    raise _too_large(limit)
                if held is not None and body is None:
                    await held.take(READ_ROOM * len(chunk))
                for part in parser.parse(chunk):
                    if isinstance(part, MultipartSegment):
                        current, pieces, size = part, [], 0
                    elif part:
                        if body is not None and current is not None and current.name == log_field:
                            await body.add(part)
                            continue
                        pieces.append(part)
                        size += len(part)
                        if (current is not None and current.name != log_field
                                and current.name not in long_fields and size > 64 * 1024):
                            raise InvalidInput(f"form field {current.name!r} is too long")
                    elif current is not None:
                        if current.name == log_field:
                            log = await body.end() if body is not None else b"".join(pieces)
                        elif current.filename:
                            files.append(current.name)
                        elif current.name in wanted:
                            fields[current.name] = b"".join(pieces).decode("utf-8", "replace")
                        current, pieces, size = None, [], 0
    except ParserLimitReached as exc:
        if "segment size" in str(exc):  # the one limit that is the log's own size
            raise _too_large(limit) from None
        raise TooLarge(f"the multipart body exceeds a parser limit: {exc} (at most "
                       f"{MAX_PARTS} parts with short headers)") from None
    except ParserError as exc:
        raise InvalidInput(f"malformed multipart body: {exc}") from None
    if log is None and log_field != "log":
        return None, fields  # the caller has another place for the log (a pasted text)
    if log is None:
        hint = f" (got a file in field {files[0]!r})" if files else ""
        raise InvalidInput(f"no log uploaded: send the file in form field 'log'{hint}, "
                           f"e.g. curl -F log=@vllm.log")
    if isinstance(log, bytes) and len(log) > limit:
        raise _too_large(limit)
    return log, fields


async def read_form(request: Request, limit: int, wanted: frozenset[str], file_field: str,
                    long_fields: frozenset[str] = frozenset(), held: Reservation | None = None,
                    body: LogBody | None = None) -> tuple[bytes | StreamedLog | None, dict[str, str]]:
    """A page's multipart form, read with the same limits as an API upload (a chunked
    body has no Content-Length to refuse early: the limit holds while it streams): the
    file of `file_field` (into `body` when given) and the `wanted` fields; a pasted log
    is a wanted field that may be as long as the limit."""
    content_type, options = _content_type(request)
    await _admit(request, limit + MULTIPART_SLACK, held)
    if content_type == "application/x-www-form-urlencoded":  # a form without a file input
        body = await _read_body(request, limit + MULTIPART_SLACK, held)
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return None, {k: v[0] for k, v in form.items() if k in wanted and v}
    if content_type != "multipart/form-data" or not options.get("boundary"):
        raise UnsupportedMediaType("the upload form posts multipart/form-data")
    return await _read_multipart(request, options["boundary"], limit, wanted, file_field, long_fields, held,
                                 body)


async def read_upload(request: Request, limit: int, held: Reservation | None = None,
                      store: bool | None = None) -> tuple[bytes | StreamedLog, dict[str, str]]:
    """The log and the override fields of an upload: the log's bytes, or with `store`
    given (True: redacted and compressed for storing, False: analyzed only) what its
    stream made of it when it was large or gzip. Raises the service errors that map to
    400/413/415 (and, streamed, 422)."""
    body = None if store is None else LogBody(request.app.state, limit, held, store=store)
    content_type, options = _content_type(request)
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip"):
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported; "
                                   f"send gzip or plain text")
    if content_type == "multipart/form-data":
        boundary = options.get("boundary")
        if not boundary:
            raise InvalidInput("multipart body without a boundary in Content-Type")
        await _admit(request, limit + MULTIPART_SLACK, held, streams=body is not None)
        return await _read_multipart(request, boundary, limit, held=held, body=body)  # type: ignore[return-value]
    if content_type.startswith("text/") or content_type in RAW_TYPES:
        await _admit(request, limit, held, streams=body is not None)
        if body is None:
            return await _read_body(request, limit, held), {}
        async for chunk in request.stream():
            await body.add(chunk)
        return await body.end(), {}
    if content_type == "application/x-www-form-urlencoded":
        # curl --data-binary @vllm.log sends this type by default: a body that does not
        # look like `log=...&engine=...` is the log itself.
        await _admit(request, limit + MULTIPART_SLACK, held)
        body = await _read_body(request, limit + MULTIPART_SLACK, held)
        if body.startswith(b"log="):
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
            fields = {k: v[0] for k, v in form.items() if k in OVERRIDE_FIELDS and v}
            data = form.get("log", [""])[0].encode("utf-8")
            if len(data) > limit:
                raise _too_large(limit)
            return data, fields
        if len(body) > limit:
            raise _too_large(limit)
        return body, {}
    raise UnsupportedMediaType(f"unsupported media type {content_type!r}; send {ACCEPTED}")
