"""The public Python API (docs/python-api.md), called as a user would: `import kb`, the
offline `kb.analyze`, and `kb.Client` against a real `kb serve` (and, for the retry
paths, the stand-in server). Loopback only."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import pytest
import yaml
from client_helpers import REPO, free_port

import kb
from tests.conftest import kb_serve_process

DOC = REPO / "docs" / "python-api.md"
SEED = REPO / "seeds" / "vllm" / "vllm-cuda-oom-kv-profiling.yaml"
TOKEN = "pyapi-test-token"


def seed_log() -> str:
    """A real vLLM log of the seed's crash: out of memory in two workers while profiling."""
    return yaml.safe_load(SEED.read_text())["examples"][0]["log"]


def fresh_log(message: str) -> str:
    """A vLLM crash no seed knows (each test raises its own `message`: numbers and ids are
    normalized away by the fingerprint, words are not)."""
    prefix = "(EngineCore_DP0 pid=2211) ERROR 11-30 07:00:01 [core.py:700] "
    return "".join(prefix + line + "\n" for line in [
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 700, in run_engine_core',
        "    raise ValueError(msg)",
        f"ValueError: {message}",
    ])


def documented_example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/python-api.md keeps its example in one ```python block"
    return blocks[0]


# ---- import ---------------------------------------------------------------------------


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True, cwd=REPO, timeout=60)
    return set(out.stdout.split())


HEAVY = {"httpx", "sqlalchemy", "litestar", "jinja2", "uvicorn", "click"}


def test_import_kb_loads_nothing_heavy():
    loaded = _modules_after("import kb") - _modules_after("pass")
    assert not loaded & (HEAVY | {"msgspec", "typing", "kb.core.analyze"})


def test_kb_analyze_and_the_answer_records_load_neither_httpx_nor_the_web_stack():
    loaded = _modules_after("import kb\nkb.analyze(b'ValueError: boom\\n')\n"
                            "kb.UploadResult, kb.IncidentDetail, kb.ClientError, kb.LogRejected")
    assert not loaded & HEAVY
    assert "httpx" in _modules_after("import kb\nkb.Client")
    # (httpx itself loads click, for its own command line, when click is installed)
    assert not _modules_after("import kb\nkb.Client") & (HEAVY - {"httpx", "click"})


def _imports_of_kb_analyze(log, *flags: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c",
                          "import sys; sys.argv = ['kb', 'analyze', *sys.argv[1:]]\n"
                          "from kb.entry import main; main()", str(log), *flags],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "torch.OutOfMemoryError" in out.stdout
    return {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}


def test_kb_analyze_command_still_loads_no_httpx(tmp_path):
    """The offline advice reads the bundled KB's SQLite file (SQLAlchemy), nothing of the
    web stack or the client; --no-kb and --json load no database layer either."""
    log = tmp_path / "vllm.log"
    log.write_text(seed_log())
    assert not _imports_of_kb_analyze(log) & (HEAVY - {"sqlalchemy"})
    assert not _imports_of_kb_analyze(log, "--no-kb") & HEAVY
    assert not _imports_of_kb_analyze(log, "--json") & HEAVY


def test_every_public_name_resolves_and_is_listed():
    assert "analyze" in kb.__all__ and "Client" in kb.__all__
    for name in kb.__all__:
        assert getattr(kb, name) is not None, name
        assert name in dir(kb)
    assert issubclass(kb.EmptyLog, kb.LogRejected) and issubclass(kb.LogRejected, ValueError)
    assert issubclass(kb.NotFound, kb.Refused) and issubclass(kb.Unauthorized, kb.ClientError)
    with pytest.raises(AttributeError):
        kb.no_such_name  # noqa: B018


def test_client_upload_fields_are_the_service_s():
    from kb.client.api import UPLOAD_FIELDS
    from kb.services.ingest import OVERRIDE_FIELDS

    assert UPLOAD_FIELDS is OVERRIDE_FIELDS  # one list, kb.services.views


# ---- kb.analyze -----------------------------------------------------------------------


def test_analyze_reads_bytes_text_gzip_and_a_path_alike(tmp_path):
    text = seed_log()
    path = tmp_path / "vllm.log.gz"
    path.write_bytes(gzip.compress(text.encode()))
    answers = [kb.analyze(text.encode()), kb.analyze(text), kb.analyze(gzip.compress(text.encode())),
               kb.analyze(path), kb.analyze(bytearray(text.encode())), kb.analyze(path, max_bytes=10**7)]
    for analysis in answers:
        assert isinstance(analysis, kb.Analysis)
        assert analysis.identifies and analysis.verdict == "found"
        root = analysis.root_cause
        assert isinstance(root, kb.ErrorEvent)
        assert root.exception == "torch.OutOfMemoryError"
        assert root.message.startswith("CUDA out of memory. Tried to allocate 1.74 GiB")
        assert root.process == "VllmWorker rank=1 pid=2978"
        assert isinstance(root.frames[-1], kb.Frame)
        assert analysis.phase == "kv_cache_profiling" and analysis.phase in kb.PHASES
        assert isinstance(analysis.context, kb.Context) and analysis.context.engine == "vllm"
        assert isinstance(analysis.fingerprint, kb.Fingerprint)
    assert len({a.fingerprint.hash for a in answers}) == 1


@pytest.mark.parametrize(("data", "kind", "message"), [
    (b"", kb.EmptyLog, "the log is empty"),
    (" \n\t\n", kb.EmptyLog, "the log is empty"),
    (gzip.compress(b"\n\n"), kb.EmptyLog, "the log is empty once decompressed"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(64), kb.NotTextLog,
     "the input is an ELF binary (a core dump?), not a text log"),
    (b"PK\x03\x04" + bytes(32), kb.NotTextLog, "the input is a ZIP archive"),
    (bytes(range(256)) * 8, kb.NotTextLog, "the input is binary, not a text log"),
])
def test_analyze_refuses_what_is_not_a_log_with_the_service_s_words(data, kind, message):
    with pytest.raises(kind) as caught:
        kb.analyze(data)
    assert isinstance(caught.value, kb.LogRejected)
    assert str(caught.value).startswith(message)


def test_analyze_refuses_an_empty_file_and_a_too_large_log(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    with pytest.raises(kb.EmptyLog, match="the log is empty"):
        kb.analyze(empty)
    big = ("INFO filler line\n" * 100_000).encode()
    with pytest.raises(kb.LogTooLarge):
        kb.analyze(big, max_bytes=1024 * 1024)
    with pytest.raises(kb.LogTooLarge, match="once decompressed"):
        kb.analyze(gzip.compress(big), max_bytes=1024 * 1024)
    assert kb.analyze(big).verdict == "no_error"  # no limit by default


def test_a_str_is_log_text_never_a_file_name(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_text(seed_log())
    with pytest.raises(TypeError, match=r"pass pathlib.Path\("):
        kb.analyze(str(path))
    assert kb.analyze("no such file, one line").verdict == "no_error"
    with pytest.raises(TypeError):
        kb.analyze(42)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        kb.analyze(tmp_path / "missing.log")


def test_the_answer_s_analysis_dict_converts_to_the_record():
    import msgspec

    analysis = kb.analyze(seed_log())
    assert msgspec.convert(analysis.to_dict(), kb.Analysis) == analysis


# ---- kb.Client against a real kb serve --------------------------------------------------


@pytest.fixture(scope="module")
def kb_serve(tmp_path_factory) -> Iterator[str]:
    """A real `kb serve` on SQLite holding one seed incident (with its two fixes), with
    KB_API_TOKENS set: uploads need the token, reads do not."""
    tmp = tmp_path_factory.mktemp("pyapi")
    seeds = tmp / "seeds"
    seeds.mkdir()
    shutil.copy(SEED, seeds / SEED.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(KB_DATABASE_URL=f"sqlite:///{tmp / 'kb.db'}", KB_SEED="1", KB_SEEDS_DIR=str(seeds),
               KB_API_TOKENS=TOKEN)
    with kb_serve_process(env, tmp / "serve.log") as url:
        yield url


@pytest.fixture
def client(kb_serve) -> Iterator[kb.Client]:
    with kb.Client(kb_serve, token=TOKEN, retries=1, backoff=0.05) as c:
        yield c


def test_the_documented_example_summarizes_a_failed_launch(kb_serve, tmp_path):
    script = tmp_path / "summarize_launch.py"
    script.write_text(documented_example())
    log = tmp_path / "vllm.log"
    log.write_text(seed_log())
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(KB_TOKEN=TOKEN, PYTHONPATH=str(REPO))

    offline = subprocess.run([sys.executable, str(script), str(log)], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=120)
    assert offline.returncode == 0, offline.stderr
    assert "Root cause: torch.OutOfMemoryError: CUDA out of memory." in offline.stdout
    assert "Process:    VllmWorker rank=1 pid=2978 (and 1 more)" in offline.stdout
    assert "Phase:      kv_cache_profiling" in offline.stdout
    assert "Crash KB" not in offline.stdout

    online = subprocess.run([sys.executable, str(script), str(log), kb_serve], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=120)
    assert online.returncode == 0, online.stderr
    out = online.stdout
    assert out.startswith(offline.stdout)
    assert f"Crash KB:   known incident {kb_serve}/incidents/" in out
    assert "CUDA out of memory in the profiling forward pass before KV cache allocation" in out
    assert "Fix:        Shrink the profiled batch [config, worked 3x, failed 0x]" in out
    assert "Recommended: patch: 'Shrink the profiled batch'" in out

    empty = tmp_path / "empty.log"
    empty.write_text("")
    refused = subprocess.run([sys.executable, str(script), str(empty), kb_serve], capture_output=True,
                             text=True, env=env, cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and refused.stdout.strip() == f"{empty}: the log is empty"


def test_submit_twice_is_one_incident_seen_twice(client):
    log = fresh_log("rope_scaling factor must be positive for the yarn scaling type")
    first = client.submit(log, engine="vllm", exit_code=3, reporter="pyapi", gpu_count=8)
    assert isinstance(first, kb.UploadResult)
    assert first.created and not first.replayed and first.match.status == "new"
    assert isinstance(first.incident, kb.IncidentRef) and first.incident.occurrences == 1
    assert isinstance(first.incident.first_seen, datetime)
    assert first.analysis["root_cause"]["exception"] == "ValueError"

    second = client.submit(log.encode())
    assert not second.created and second.match.status == "known"
    assert second.incident.id == first.incident.id and second.incident.occurrences == 2
    assert second.occurrence.id != first.occurrence.id

    detail = client.incident(first.incident.id)
    assert isinstance(detail, kb.IncidentDetail)
    assert detail.occurrence_count == 2 and len(detail.occurrences) == 2
    assert isinstance(detail.created_at, datetime)
    assert all(isinstance(o, kb.OccurrenceView) for o in detail.occurrences)
    ours = next(o for o in detail.occurrences if o.id == first.occurrence.id)
    assert (ours.exit_code, ours.reporter, ours.gpu_count) == (3, "pyapi", 8)
    assert detail.analysis["root_cause"]["message"].startswith("rope_scaling factor")


def test_the_same_idempotency_key_never_stores_twice(client, tmp_path):
    path = tmp_path / "crash.log"
    path.write_text(fresh_log("tokenizer_mode mistral needs the mistral_common package installed"))
    key = uuid.uuid4().hex
    first = client.submit(path, idempotency_key=key)
    again = client.submit(path, idempotency_key=key)
    assert again.replayed and again.occurrence.id == first.occurrence.id
    assert client.incident(first.incident.id).occurrence_count == 1


def test_remote_analyze_matches_and_advises_without_storing(client):
    before = client.search(engine="vllm", has_fix=True)
    answer = client.analyze(seed_log(), engine="vllm")
    assert answer.occurrence is None and not answer.created
    assert answer.match.status == "known" and answer.incident is not None
    assert [fix.title for fix in answer.fixes][:1] == ["Shrink the profiled batch"]
    assert all(isinstance(fix, kb.FixView) for fix in answer.fixes)
    assert isinstance(answer.recommendation, kb.RecommendationView)
    assert answer.recommendation.path == "patch"
    after = client.search(engine="vllm", has_fix=True)
    assert [i.occurrences for i in after.items] == [i.occurrences for i in before.items]
    # POST /analyze needs no token
    with kb.Client(client.url) as anonymous:
        assert anonymous.analyze(seed_log().encode()).match.status == "known"


def test_search_and_incident_return_typed_records(client):
    found = client.search("profiling forward pass", engine="vllm", has_fix=True, per_page=5)
    assert isinstance(found, kb.IncidentList)
    assert found.total == 1 and found.page == 1 and found.per_page == 5
    summary = found.items[0]
    assert isinstance(summary, kb.IncidentSummary)
    assert summary.slug == "vllm-cuda-oom-kv-profiling" and summary.fixes == 2 and summary.seeded
    detail = client.incident(summary.id)
    assert detail.title == summary.title and detail.phase == "kv_cache_profiling"
    assert [fix.title for fix in detail.fixes] == ["Shrink the profiled batch",
                                                   "Reduce what else occupies the GPU"]
    assert isinstance(detail.updated_at, datetime)
    assert client.search("no incident says this 7f3a9c").total == 0
    assert client.search(engine="sglang").items == []
    with pytest.raises(kb.NotFound) as caught:
        client.incident(10**9)
    assert caught.value.status_code == 404 and "does not exist" in caught.value.detail


def test_a_refused_upload_raises_with_the_service_s_detail(client):
    with pytest.raises(kb.Refused) as caught:
        client.submit(b"")
    assert caught.value.status_code == 400 and caught.value.detail == "the log is empty"
    binary = b"\x7fELF\x02\x01\x01\x00" + bytes(64)
    with pytest.raises(kb.Refused) as caught:
        client.submit(binary)
    assert caught.value.status_code == 422
    with pytest.raises(kb.NotTextLog) as local:
        kb.analyze(binary)
    assert caught.value.detail == str(local.value)  # one check, the same words
    with pytest.raises(TypeError, match="gpu_cout"):
        client.submit(seed_log(), gpu_cout=2)


def test_an_upload_without_the_token_is_unauthorized(kb_serve):
    with kb.Client(kb_serve, retries=0) as anonymous:
        with pytest.raises(kb.Unauthorized) as caught:
            anonymous.submit(seed_log())
        assert caught.value.status_code == 401 and "Bearer" in caught.value.detail
        assert anonymous.search().total >= 1  # reads stay open
    with kb.Client(kb_serve, token="wrong", retries=0) as wrong, pytest.raises(kb.Unauthorized):
        wrong.submit(seed_log())


# ---- retries --------------------------------------------------------------------------


def test_a_server_that_is_down_is_unreachable_after_the_retries():
    url = f"http://127.0.0.1:{free_port()}"  # bound and closed again: nothing listens
    started = time.monotonic()
    with kb.Client(url, retries=2, backoff=0.1) as client, pytest.raises(kb.Unreachable) as caught:
        client.submit(seed_log())
    elapsed = time.monotonic() - started
    assert caught.value.status_code is None and caught.value.url == url
    assert "cannot reach" in caught.value.detail and "after 3 attempts" in str(caught.value)
    assert 0.1 <= elapsed < 10  # waited 0.05-0.1 s, then 0.1-0.2 s
    with kb.Client(url, retries=0) as client, pytest.raises(kb.ClientError):
        client.search()


def test_transient_failures_are_retried_with_one_idempotency_key(standin):
    server = standin("--fail-first", "2")
    with kb.Client(server.url, retries=3, backoff=0.01) as client:
        answer = client.submit(seed_log(), exit_code=1)
    assert answer.incident.id == 1
    uploads = server.uploads()
    assert [u["answered"] for u in uploads] == [503, 503, 201]
    assert len({u["idempotency_key"] for u in uploads}) == 1 and uploads[0]["idempotency_key"]
    assert all(u["fields"] == {"exit_code": "1"} for u in uploads)


def test_a_service_that_stays_unavailable_raises_its_detail(standin):
    server = standin("--status", "503")
    with kb.Client(server.url, retries=1, backoff=0.01) as client, pytest.raises(kb.Unavailable) as caught:
        client.submit(seed_log())
    assert caught.value.status_code == 503
    assert caught.value.detail == "database unavailable, retry later"
    assert len(server.uploads()) == 2  # not retried past `retries`


def test_a_client_error_is_not_retried(standin):
    server = standin("--status", "413")
    with kb.Client(server.url, retries=3, backoff=0.01) as client, pytest.raises(kb.Refused) as caught:
        client.submit(seed_log())
    assert caught.value.status_code == 413 and len(server.uploads()) == 1


def test_a_bad_url_is_refused_at_once():
    with pytest.raises(ValueError, match="http"):
        kb.Client("127.0.0.1:8000")
    assert kb.Client("http://127.0.0.1:8000/incidents/").url == "http://127.0.0.1:8000"
