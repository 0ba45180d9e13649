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
