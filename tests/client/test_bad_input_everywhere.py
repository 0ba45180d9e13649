"""One behaviour for bad input: an empty, blank, binary or archived log gets the same
message from the API (4xx), `kb analyze` and `kb submit` (exit 1, nothing sent or
spooled). The words come from one place, kb.core.textlog."""

from __future__ import annotations

import gzip

import pytest
from client_helpers import free_port, run_kb, spool_entries

from tests.service.helpers import api_client

BAD = {
    "empty": (b"", 400, "the log is empty"),
    "blank": (b"  \n\n\t\n", 400, "the log is empty"),
    "gzip-of-nothing": (gzip.compress(b"\n"), 400, "the log is empty"),
    "nul-bytes": (b"\x00\x01\x02ELF-ish\x00" * 100, 422, "the input is binary, not a text log"),
    "png": (b"\x89PNG\r\n\x1a\n" + bytes(200), 422, "the input is a PNG image, not a text log"),
    "zip": (b"PK\x03\x04" + bytes(100), 422, "the input is a ZIP archive, not a text log"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_api_and_the_cli_refuse_with_the_same_words(case, db, kb_env, tmp_path):
    data, status, words = BAD[case]
    log = tmp_path / "launch.log"
    log.write_bytes(data)
    with api_client(db) as client:
        answer = client.post("/incidents", files={"log": ("launch.log", data, "text/plain")})
        analyzed = client.post("/analyze", content=data, headers={"Content-Type": "text/plain"})
    if case == "empty":  # an empty multipart field never reaches the check: said by the reader
        assert answer.status_code == 400
    else:
        assert (answer.status_code, answer.json()["detail"].startswith(words)) == (status, True)
        assert analyzed.status_code == status

    analyze = run_kb(["analyze", str(log)], kb_env)
    analyze_stdin = run_kb(["analyze", "-"], kb_env, input=data)
    submit = run_kb(["submit", str(log), "--server", f"http://127.0.0.1:{free_port()}"], kb_env)
    for done in (analyze, analyze_stdin, submit):
        stderr = done.stderr.decode()
        assert done.returncode == 1, stderr
        assert words in stderr and "Traceback" not in stderr
        assert done.stdout == b""
    assert spool_entries(kb_env) == []  # refused before any upload: nothing kept to resend


def test_the_analyze_fast_path_and_the_click_path_agree(kb_env, tmp_path):
    log = tmp_path / "blob.bin"
    log.write_bytes(b"\x7fELF" + bytes(64))
    fast = run_kb(["analyze", str(log)], kb_env)
    slow = run_kb(["analyze", "--json", str(log), "--"], kb_env)  # not the fast path's shape
    assert fast.returncode == slow.returncode == 1
    assert "an ELF binary (a core dump?), not a text log" in fast.stderr.decode()
    assert fast.stderr.decode().splitlines()[-1] == slow.stderr.decode().splitlines()[-1]
