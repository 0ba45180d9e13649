"""Reading an upload as it streams in: the log comes out byte for byte whatever the
chunking of the body, with the override fields beside it."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from kb.web.uploads import read_upload
from tests.service.helpers import api_client


class StreamingRequest:
    """What read_upload uses of a Litestar request, fed in chunks of `size` bytes."""

    def __init__(self, content_type: str, body: bytes, size: int) -> None:
        self.headers = {"content-type": content_type, "content-length": str(len(body))}
        self._body, self._size = body, size

    async def stream(self):
        for start in range(0, len(self._body), self._size):
            yield self._body[start:start + self._size]
        yield b""


@pytest.mark.parametrize("size", [1, 7, 4096, 65536, 10**7])
def test_multipart_log_is_read_whole_in_any_chunking(size):
    log = b"".join(b"line %d --boundary-like \r\n\xe9\n" % n for n in range(500))
    request = httpx.Request("POST", "http://kb/incidents", data={"engine": "vllm", "tp": "8"},
                            files={"log": ("vllm.log", log)})
    body = request.read()
    data, fields = asyncio.run(read_upload(
        StreamingRequest(request.headers["content-type"], body, size), 1 << 30))
    assert data == log
    assert fields == {"engine": "vllm", "tp": "8"}


def test_a_multipart_limit_says_which_limit_it_is(db):
    """65 tiny parts, or one part with a 10 KB header line, in a 30 KB request: the 413
    names the parser limit, not the size limit the request is far below."""
    boundary = "kbtestboundary"
    many = "".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"f{n}\"\r\n\r\nx\r\n"
                   for n in range(65)) + f"--{boundary}--\r\n"
    long_header = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"log\"; filename=\"{'a' * 10_000}\"\r\n"
                   f"\r\nValueError: x\r\n--{boundary}--\r\n")
    for body, words in ((many, "Maximum segment count exceeded"), (long_header, "header length")):
        with api_client(db) as client:
            answer = client.post("/incidents", content=body.encode(),
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert answer.status_code == 413, answer.text
        detail = answer.json()["detail"]
        assert words in detail and "MiB" not in detail


def test_the_ui_upload_form_is_read_with_the_api_limits_even_when_chunked(db):
    """A chunked multipart body (no Content-Length to refuse up front) larger than the
    limit gets a 413 page while it streams in, before any token check or analysis."""
    boundary = "kbform"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n").encode()

    def body():
        yield head
        for _ in range(3 * 1024):  # 3 MiB of pasted log, with a 1 MiB limit
            yield b"x" * 1023 + b"\n"
        yield f"\r\n--{boundary}--\r\n".encode()

    with api_client(db, max_upload_mb=1) as client:
        answer = client.post("/ui/upload", content=body(),
                             headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert answer.status_code == 413 and "text/html" in answer.headers["content-type"]
        assert "larger than 1 MiB" in answer.text
        ok = client.post("/ui/upload", files={"log": ("", b"", "application/octet-stream")},
                         data={"text": "ValueError: pasted\n", "mode": "analyze"})
        assert ok.status_code == 200 and "pasted" in ok.text
