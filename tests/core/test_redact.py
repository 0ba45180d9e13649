from kb.core.analyze import analyze, redacted_log
from kb.core.redact import redact

SECRETS = {
    "hf_abcdefghijklmnopqrstuvwxyz012345": "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345",
    "sk-proj-AAAABBBBCCCCDDDD1234": "vllm serve m --api-key sk-proj-AAAABBBBCCCCDDDD1234",
    "eyJhbGciOiJIUzI1NiJ9.payload.sig": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig'",
    "hunter2": "KB_DATABASE_URL=postgresql://kb:hunter2@db:5432/kb",
    "wJalrXUtnFEMI/K7MDENG": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG",
    "AKIAIOSFODNN7EXAMPLE": "aws key AKIAIOSFODNN7EXAMPLE in use",
    "s3cr3t-value": "non-default args: {'model': 'x', 'api_key': 's3cr3t-value'}",
}


def test_each_secret_is_masked_and_counted():
    for secret, line in SECRETS.items():
        text, count = redact(line)
        assert secret not in text, line
        assert count >= 1


def test_plain_lines_are_untouched():
    line = "INFO 02-22 17:52:14 [core.py:1] max_num_batched_tokens=2048 CUDA_VISIBLE_DEVICES=0,1"
    assert redact(line) == (line, 0)


def test_analysis_never_carries_a_secret():
    log = "\n".join([*SECRETS.values(), "Traceback (most recent call last):",
                     '  File "/x/site-packages/vllm/entrypoints/api_server.py", line 3, in main',
                     "ValueError: bad token hf_abcdefghijklmnopqrstuvwxyz012345"]).encode()
    result = analyze(log)
    dumped = str(result.to_dict())
    for secret in SECRETS:
        assert secret not in dumped
    assert result.redactions >= len(SECRETS)
    text, count = redacted_log(log)
    assert count == result.redactions
    assert all(secret.encode() not in text for secret in SECRETS)


def test_prefiltered_redaction_equals_redacting_every_line():
    from kb.core.redact import redact_lines

    log = ("INFO ok\n" * 50 + "\n".join(SECRETS.values()) + "\nplain tail é\n" + "x" * 10).encode()
    text, count = redact_lines(log.decode())
    assert count >= len(SECRETS)
    assert redacted_log(log) == (text.encode(), count)


def test_stored_log_is_valid_utf8_with_the_secrets_masked():
    """Lines without secrets are copied as bytes; the result is still valid UTF-8 when
    the upload is not (a latin-1 line), and NUL bytes are gone."""
    log = (b"INFO caf\xe9 au lait\n"
           b"export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345\n"
           b"plain \x00line\n")
    stored, count = redacted_log(log)
    text = stored.decode("utf-8")  # raises if the bytes are not UTF-8
    assert count == 1
    assert "hf_abcdefghijklmnopqrstuvwxyz012345" not in text
    assert text.startswith("INFO caf\ufffd au lait\n") and "\x00" not in text


def _storage_cases():
    """Logs the one-pass path must store exactly as analyze + redacted_log do."""
    from pathlib import Path

    from kb.core.analyze import inflate

    fixtures = sorted((Path(__file__).parent / "fixtures").glob("*.log*"))
    for path in fixtures:
        yield path.name, inflate(path.read_bytes()).replace(b"\x00", b"")
    secrets = "\n".join(SECRETS.values())
    warning = "(Worker pid=7) WARNING 02-22 17:51:12 [env.py:1] HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345"
    body = "INFO 02-22 17:51:00 [a.py:1] start\n" + "INFO 02-22 17:51:01 [a.py:2] step\n" * 3000
    yield "secret first", (secrets + "\n" + body).encode()
    yield "secret in a warning line", (body + warning + "\n" + body).encode()
    yield "secret on a last line without newline", (body + secrets).encode()
    yield "secrets beyond one scan slice", (body * 12 + secrets + "\n" + body * 12 + secrets).encode()
    yield "one line, no newline", secrets.replace("\n", " ").encode()
    yield "an endless line", ("x" * 300_000 + " HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345").encode()
    yield "latin-1 bytes", b"INFO caf\xe9\n" + secrets.encode() + b"\nplain \xff tail"


def test_one_pass_storage_equals_analysis_plus_redaction():
    from kb.core.analyze import analyze_for_storage

    for name, log in _storage_cases():
        analysis, stored, count = analyze_for_storage(log)
        assert (stored, count) == redacted_log(log), name
        assert analysis.to_dict() == analyze(log).to_dict(), name


def test_one_pass_storage_masks_every_secret():
    from kb.core.analyze import analyze_for_storage

    for name, log in _storage_cases():
        _, stored, _ = analyze_for_storage(log)
        for secret in SECRETS:
            assert secret.encode() not in stored, (name, secret)


def test_without_hyperscan_the_verdict_is_the_same(monkeypatch):
    """The pre-filter only saves time: with no hyperscan (an unsupported platform) every
    line is parsed and every literal tested by hand. The crash found, its fingerprint,
    phase, symptoms and time to crash do not change, nor does the stored log (parsing
    every line may find more context and process names)."""
    from kb.core import scan
    from kb.core.analyze import analyze_for_storage

    cases = list(_storage_cases())
    expected = [(analyze(log).to_dict(), redacted_log(log)) for _, log in cases]
    monkeypatch.setattr(scan, "hyperscan", None)
    for (name, log), (want, stored) in zip(cases, expected):
        got = analyze(log).to_dict()
        for key in ("root_cause", "fingerprint", "phase", "symptoms"):
            assert got[key] == want[key], (name, key)
        if want["root_cause"] is not None:
            assert got["timing"] == want["timing"], name
        assert redacted_log(log) == stored, name
        assert analyze_for_storage(log)[1:] == stored, name
