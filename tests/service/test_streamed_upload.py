"""A large or gzip upload is analyzed, redacted and compressed as it streams in
(kb.web.logbody, kb.services.streamupload), with the answer, the stored log and the
refusals of an upload analyzed whole, on SQLite and Postgres."""

from __future__ import annotations

import gzip

import pytest

from kb.core import textlog
from kb.services import ingest, streamupload
from kb.services.errors import InvalidInput, NotText, TooLarge
from kb.services.views import Overrides
from kb.db.logcodec import decompress_log
from kb.web import logbody
from tests.service.helpers import api_client
from tests.service.planted import ALL_SECRETS, vllm_crash_log
from tests.service.logs import vllm_log

JSON = {"Accept": "application/json"}


@pytest.fixture
def streams(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Streams feed 16 KiB batches (instead of 1 MiB); the list counts the uploads that
    took the streaming path."""
    monkeypatch.setattr(logbody, "STREAM_BATCH", 16 * 1024)
    finished: list[int] = []
    finish = streamupload.UploadStream.finish

    def counted(self: streamupload.UploadStream) -> streamupload.StreamedLog:
        finished.append(1)
        return finish(self)

    monkeypatch.setattr(streamupload.UploadStream, "finish", counted)
    return finished


def _big_crash_log() -> bytes:
    """A crash with planted secrets after ~300 KiB of start-up lines."""
    noise = "".join(f"INFO 12-01 10:00:{n % 60:02d} [loader.py:88] weights shard {n} loaded\n"
                    for n in range(5000))
    return (noise + vllm_crash_log()).encode()


def _stored_log(client, answer: dict) -> str:
    return client.get(f"/occurrences/{answer['occurrence']['id']}/log").text


def test_a_streamed_upload_answers_and_stores_what_a_whole_one_does(db, streams):
    log = _big_crash_log()
    with api_client(db) as client:
        whole = client.post("/incidents", files={"log": ("vllm.log", log)}, headers=JSON)
        assert whole.status_code == 201 and not streams
        with pytest.MonkeyPatch.context() as patch:  # logs over 64 KiB stream (not 4 MiB)
            patch.setattr(logbody, "STREAM_AFTER", 64 * 1024)
            multipart = client.post("/incidents", files={"log": ("vllm.log", log)}, headers=JSON)
            raw_gzip = client.post("/incidents", content=gzip.compress(log),
                                   headers={**JSON, "Content-Type": "application/gzip"})
            analyzed = client.post("/analyze", content=log,
                                   headers={**JSON, "Content-Type": "text/plain"})
        assert len(streams) == 3
        for streamed in (multipart, raw_gzip):
            assert streamed.status_code == 200, streamed.text
            body = streamed.json()
            assert body["match"]["status"] == "known"
            assert body["incident"]["id"] == whole.json()["incident"]["id"]
            assert body["analysis"] == whole.json()["analysis"]
            stored = _stored_log(client, body)
            assert stored == _stored_log(client, whole.json())
            assert not [secret for secret in ALL_SECRETS if secret in stored]
        assert analyzed.status_code == 200
        assert analyzed.json()["analysis"] == whole.json()["analysis"]
        assert analyzed.json()["occurrence"] is None


def test_streamed_refusals_are_the_whole_ones(db, streams):
    with api_client(db, max_upload_mb=1) as client:
        def send(body: bytes) -> tuple[int, str]:
            answer = client.post("/incidents", content=body,
                                 headers={**JSON, "Content-Type": "application/gzip"})
            return answer.status_code, answer.json()["detail"]

        assert send(gzip.compress(b"\n \n")) == (400, "the log is empty once decompressed")
        status, detail = send(gzip.compress(b"A\n" * (1 << 20)))
        assert status == 413 and "once decompressed" in detail
        status, detail = send(gzip.compress(b"\x89PNG\r\n\x1a\n" + bytes(1000)))
        assert status == 422 and "PNG" in detail
        status, detail = send(gzip.compress(vllm_log().encode())[:-20])
        assert status == 422 and "truncated" in detail
        status, detail = send(b"\x1f\x8b" + b"not deflate at all" * 10)
        assert status == 422 and "does not decompress" in detail
        assert client.get("/incidents").json()["total"] == 0


@pytest.mark.parametrize("chunk", [1, 777, 64 * 1024, 1 << 20])
def test_the_stream_is_the_same_however_the_body_is_cut(chunk):
    log = _big_crash_log()
    whole = ingest.prepare_upload(log, Overrides(), max_bytes=64 << 20)
    for data in (log, gzip.compress(log) + gzip.compress(b"INFO tail line\n")[:0],
                 "\ufeff".encode("utf-16-le")[:0] + log):
        stream = streamupload.UploadStream(64 << 20, store=True)
        size = chunk if chunk > 1 else 1
        for start in range(0, min(len(data), 200_000) if chunk == 1 else len(data), size):
            stream.feed(data[start:start + size])
        if chunk == 1:
            stream.feed(data[200_000:])
        out = stream.finish()
        assert ingest.analysis_dict(out.analysis) == whole.occurrence["analysis"]
        assert out.redactions == whole.occurrence["redactions"]
        assert decompress_log(out.log_compressed) == decompress_log(whole.occurrence["log_compressed"])


def test_text_stream_refuses_like_prepare_log():
    cases = [
        b"", b" \n\t\n", gzip.compress(b"\n\n"), b"\x7fELF" + bytes(100), bytes(10) + b"x" * 100,
        gzip.compress(b"line\n")[:-3], b"\x1f\x8b\x08garbage", b"\xff\xfe" + b"a\x00b",
        gzip.compress(b"x\n" * 5000), gzip.compress(b"first\n") + b"\x00\x00" + gzip.compress(b"second\n"),
        gzip.compress(b"first\n") + b"trailing garbage", "é log\n".encode("utf-16"),
    ]
    for data in cases:
        try:
            expected: bytes | str = textlog.prepare_log(data, 4096)
        except textlog.LogRejected as exc:
            expected = f"{type(exc).__name__}: {exc}"
        stream = textlog.TextStream(4096)
        try:
            got: bytes | str = b"".join([*(p for i in range(0, len(data), 3)
                                           for p in stream.feed(data[i:i + 3])), *stream.finish()])
        except textlog.LogRejected as exc:
            got = f"{type(exc).__name__}: {exc}"
        assert got == expected, data


def test_stream_errors_are_service_errors():
    for data, error in ((b"  ", InvalidInput), (b"x" * 5000, TooLarge),
                        (b"\x7fELF" + bytes(3000), NotText)):
        stream = streamupload.UploadStream(4096, store=False)
        with pytest.raises(error):
            stream.feed(data)
            stream.finish()


def test_the_upload_page_streams_a_gzip_file_too(db, streams):
    log = _big_crash_log()
    with api_client(db) as client:
        for mode, status in (("analyze", 200), ("store", 201)):
            page = client.post("/ui/upload", files={"log": ("vllm.log.gz", gzip.compress(log))},
                               data={"mode": mode})
            assert page.status_code == status, page.text[:500]
            assert "text/html" in page.headers["content-type"]
        assert len(streams) == 2
        assert client.get("/incidents", headers=JSON).json()["total"] == 1
