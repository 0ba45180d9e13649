import gzip
import random
import re

import pytest

from kb.core import scan
from kb.core.analyze import analyze, analyze_for_storage, redacted_log
from kb.core.redact import MASK, QUICK_LITERALS, SECRET_RULES, looks_random, redact, redact_field, redact_lines
from kb.core.redactlog import LogRedactor, redact_chunks
from tests.service.planted import (
    ALL_SECRETS,
    KINDS,
    NOT_SECRETS,
    PEM_BLOCKS,
    PEM_SECRETS,
    non_secret_log,
    pem_lines,
    vllm_crash_log,
)

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
    yield "every planted kind", vllm_crash_log().encode()
    yield "every planted kind, buried", (body * 4 + vllm_crash_log() + body * 4).encode()


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
        for secret in (*SECRETS, *ALL_SECRETS):
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


# --- every kind, one by one ------------------------------------------------------------

def test_there_are_at_least_25_kinds():
    assert len({p.kind for p in KINDS}) + len(PEM_BLOCKS) >= 25
    assert len({rule.name for rule in SECRET_RULES}) >= 25


@pytest.mark.parametrize("planted", KINDS, ids=lambda p: p.kind)
def test_each_kind_is_masked_once_and_stays_masked(planted):
    text, count = redact(planted.line)
    assert planted.secret not in text, text
    assert count >= 1 and MASK in text
    assert redact(text) == (text, 0)  # masked output is left alone (the service redacts the client's again)
    assert redact_field(planted.line) == text


@pytest.mark.parametrize("planted", KINDS, ids=lambda p: p.kind)
def test_the_name_stays_and_only_the_value_goes(planted):
    """What was redacted still reads: the text before the value (its name, the flag, the
    URL's user) is kept, and nothing after the value is lost."""
    text, _ = redact(planted.line)
    head, tail = planted.line.split(planted.secret, 1)
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_.-]{3,}", head)
    kept = [w for w in words if w in text]
    assert len(kept) >= len(words) - 1, (words, text)  # a URL user or a token prefix may go with the value
    assert text.endswith(tail.split(" ")[-1]) or not tail.strip()


@pytest.mark.parametrize("label,body", PEM_BLOCKS, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("prefix", ["", "(EngineCore_DP0 pid=3502) ERROR 08-14 06:04:58 [core.py:700] ",
                                    "vllm-1  | ", "    "])
def test_pem_private_key_blocks_are_masked_across_lines(label, body, prefix, monkeypatch):
    before = ["INFO 08-14 06:01:00 [a.py:1] start", "ValueError: Could not deserialize key data:"]
    after = ["INFO 08-14 06:01:02 [a.py:2] Loading weights took 1.5 GB", "plain tail"]
    text = "\n".join([*before, *pem_lines(label, body, prefix), *after]) + "\n"
    masked, count = redact_lines(text)
    assert count == 1
    assert not any(line in masked for line in body)
    assert f"-----BEGIN {label}-----" in masked and f"-----END {label}-----" in masked
    assert all(line in masked for line in before + after)  # the lines around it are untouched
    assert masked.count("\n") == text.count("\n")
    for hyperscan in (scan.hyperscan, None):
        monkeypatch.setattr(scan, "hyperscan", hyperscan)
        assert redacted_log(text.encode()) == (masked.encode(), 1)
        _, stored, stored_count = analyze_for_storage(text.encode())
        assert (stored, stored_count) == (masked.encode(), 1)
        analysis = str(analyze(text.encode()).to_dict())
        assert not any(line in analysis for line in body)


def test_a_key_in_a_json_string_keeps_its_markers():
    line = '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"}'
    text, count = redact(line)
    assert text == '{"private_key": "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----\\n"}' and count == 1


def test_a_key_in_a_traceback_message_is_not_in_the_analysis():
    label, body = PEM_BLOCKS[0]
    prefix = "(EngineCore_DP0 pid=3502) ERROR 08-14 06:04:58 [core.py:700] "
    log = "\n".join([f"{prefix}Traceback (most recent call last):",
                     f'{prefix}  File "/x/site-packages/vllm/v1/engine/core.py", line 3, in load',
                     f"{prefix}    key = load_pem_private_key(data)",
                     f"{prefix}ValueError: Could not deserialize key data: {pem_lines(label, body)[0]}",
                     *pem_lines(label, body, prefix)[1:]]).encode()
    analysis = analyze(log)
    assert analysis.root_cause is not None and analysis.root_cause.exception == "ValueError"
    dumped = str(analysis.to_dict())
    assert not any(line in dumped for line in body)
    assert not any(line.encode() in analyze_for_storage(log)[1] for line in body)


# --- what is not a secret stays ------------------------------------------------------------

@pytest.mark.parametrize("text", NOT_SECRETS)
def test_non_secrets_are_untouched(text):
    assert redact(text) == (text, 0)


def test_a_log_of_non_secrets_is_stored_and_analysed_unchanged(monkeypatch):
    log = non_secret_log()
    for hyperscan in (scan.hyperscan, None):
        monkeypatch.setattr(scan, "hyperscan", hyperscan)
        analysis, stored, count = analyze_for_storage(log.encode())
        assert (stored, count) == (log.encode(), 0)
        assert analysis.redactions == 0
        dumped = str(analysis.to_dict())
        assert MASK not in dumped
        assert "cudaErrorIllegalAddress, error code 700" in dumped and "0x7f3a2b1c4d50" in dumped
        assert analysis.context.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_random_looking_values_only():
    assert looks_random("Zk9x2LmQ8vR3tY7wP1nB5cD") and looks_random("8f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e")
    for value in ("/run/secrets/hf_token_file", "meta-llama/Llama-3.1-8B-Instruct", "${HF_TOKEN_FROM_VAULT}",
                  "https://vault.internal/v1/kv", "1234567890123456789", "short", "disabled_for_local_testing"):
        assert not looks_random(value), value


def test_key_like_names_are_judged_by_the_whole_name():
    value = "Zk9x2LmQ8vR3tY7wP1nB5cD"
    for line in (f"service_token: {value}", f"apiKey={value}", f"client-credentials: {value}", f"x_auth='{value}'",
                 f"db.passwd = {value}", f"--auth-token {value}", f"storage_access_key: {value}"):
        assert value not in redact(line)[0], line
    for line in (f"eos_token: {value}", f"cache_key={value}", f"prefix_cache_key: {value}", f"tokenizer: {value}",
                 f"max_tokens: {value}", f"monkey={value}", f"keys: {value}", f"key_cache={value}",
                 f"public_key: {value}", f"--tokenizer-mode {value}"):
        assert redact(line) == (line, 0), line


# --- the pre-filter: every line a rule can match is flagged, the same with or without hyperscan

def test_every_rule_needs_one_of_its_anchors():
    """A rule is tried only on lines holding one of its anchors: on every text of the
    corpus a rule matches, one of its anchors is present, and each anchor holds one of
    QUICK_LITERALS (which the pre-filter looks for)."""
    corpus = [rule.sample for rule in SECRET_RULES] + [p.line for p in KINDS] + vllm_crash_log().split("\n")
    for rule in SECRET_RULES:
        assert any(a in rule.sample for a in rule.anchors), rule.name
        for anchor in rule.anchors:
            assert any(literal in anchor for literal in QUICK_LITERALS), (rule.name, anchor)
        for text in corpus:
            if rule.pattern.search(text):
                assert any(a in text for a in rule.anchors), (rule.name, text)


def test_both_pre_filters_flag_every_line_that_holds_a_secret(monkeypatch):
    log = vllm_crash_log().encode() + b"INFO tail without a newline hf_abcdefghijklmnopqrstuvwxyz0123"
    flagged = scan.secret_lines(log)
    monkeypatch.setattr(scan, "hyperscan", None)
    assert scan.secret_lines(log) == flagged
    starts = {start for start, _ in flagged}
    position = 0
    for line in log.split(b"\n"):
        if redact(line.decode())[1]:
            assert position in starts, line
        position += len(line) + 1


# --- streams: the client's redaction ---------------------------------------------------

def test_a_stream_cut_anywhere_is_redacted_as_the_whole(monkeypatch):
    log = (non_secret_log() * 3 + vllm_crash_log() + non_secret_log()).encode()
    want = redacted_log(log)
    rng = random.Random(5)
    for _ in range(20):
        redactor, out, position = LogRedactor(), [], 0
        while position < len(log):
            size = rng.choice([1, 7, 64, 1000, 65536])
            out.append(redactor.feed(log[position:position + size]))
            position += size
        out.append(redactor.finish())
        assert (b"".join(out), redactor.redactions) == want
    assert b"".join(redact_chunks([gzip.compress(log)[i:i + 999] for i in range(0, len(log), 999)])) == want[0]
    monkeypatch.setattr(scan, "hyperscan", None)
    assert b"".join(redact_chunks([log])) == want[0]


def test_a_stream_keeps_every_byte_it_does_not_redact():
    raw = b"\x00binary \xff\xfe head\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123\ntail \xe9\x00\n"
    assert b"".join(redact_chunks([raw])) == b"\x00binary \xff\xfe head\nHF_TOKEN=***\ntail \xe9\x00\n"
