"""Property tests: the analyzer never raises on arbitrary bytes, and the fingerprint is
stable under what varies between runs of the same crash."""

import gzip

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.core.analyze import Analyzer, analyze

TEMPLATE = """({proc} pid={pid}) INFO {date} {time} [loader.py:{n1}] Loading weights took 1.{n2} GB
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}] WorkerProc hit an exception.
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}] Traceback (most recent call last):
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}]   File "{prefix}/vllm/v1/worker/gpu_worker.py", line {n4}, in determine_available_memory
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}]     self.model_runner.profile_run()
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}]   File "{prefix}/vllm/v1/worker/gpu_model_runner.py", line {n5}, in profile_run
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}]     hidden_states = self._dummy_run(self.max_num_tokens)
({proc} pid={pid}) ERROR {date} {time} [multiproc_executor.py:{n3}] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size} GiB. GPU {gpu} has a total capacity of 79.19 GiB of which 1{size} MiB is free. Process {pid} has 79.0 GiB memory in use.
(EngineCore_DP0 pid={pid2}) ERROR {date} {time} [core.py:{n6}] RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}
"""

prefixes = st.sampled_from(["/usr/local/lib/python3.12/dist-packages", "/root/venv/lib/python3.11/site-packages",
                            "/home/user/.conda/envs/x/lib/python3.10/site-packages"])
numbers = st.integers(min_value=1, max_value=99999)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_never_raises_on_arbitrary_bytes(data):
    result = analyze(data)
    assert result.fingerprint.hash
    assert result.to_dict()["fingerprint"]["version"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=512), max_size=8))
def test_chunking_never_raises_and_matches_one_shot(chunks):
    analyzer = Analyzer()
    for chunk in chunks:
        analyzer.feed(chunk)
    streamed = analyzer.finish()
    assert streamed.fingerprint.hash == analyze(b"".join(chunks)).fingerprint.hash


@settings(max_examples=60, deadline=None)
@given(prefix=prefixes, proc=st.sampled_from(["VllmWorker TP3", "Worker_TP0", "VllmWorker rank=5"]),
       pid=numbers, pid2=numbers, n1=numbers, n2=numbers, n3=numbers, n4=numbers, n5=numbers, n6=numbers,
       gpu=st.integers(0, 7), size=st.sampled_from(["1.74", "2.00", "448.00"]),
       date=st.sampled_from(["02-22", "11-30"]), time=st.sampled_from(["17:52:14", "03:00:01"]))
def test_fingerprint_stable_under_paths_lines_pids_ranks_sizes_and_times(**values):
    result = analyze(TEMPLATE.format(**values).encode())
    reference = analyze(TEMPLATE.format(**{**values, "prefix": "/opt/venv/lib/python3.12/site-packages", "pid": 1,
                                           "pid2": 2, "n3": 1, "n4": 1, "n5": 1, "gpu": 0, "size": "9.99",
                                           "date": "01-01", "time": "00:00:00", "proc": "VllmWorker TP0"}).encode())
    assert result.root_cause.exception == "torch.OutOfMemoryError"
    assert result.fingerprint.hash == reference.fingerprint.hash


def test_different_causes_get_different_fingerprints():
    oom = TEMPLATE.format(prefix="/p", proc="Worker_TP0", pid=1, pid2=2, n1=1, n2=1, n3=1, n4=1, n5=1, n6=1,
                          gpu=0, size="1.00", date="01-01", time="00:00:00")
    other = oom.replace("torch.OutOfMemoryError: CUDA out of memory.", "ValueError: No available memory for the cache blocks.")
    assert analyze(oom.encode()).fingerprint.hash != analyze(other.encode()).fingerprint.hash


def test_gzip_input_is_detected_by_magic_bytes():
    log = TEMPLATE.format(prefix="/p", proc="Worker_TP0", pid=1, pid2=2, n1=1, n2=1, n3=1, n4=1, n5=1, n6=1,
                          gpu=0, size="1.00", date="01-01", time="00:00:00").encode()
    plain, packed = analyze(log), analyze(gzip.compress(log))
    assert packed.root_cause.exception == "torch.OutOfMemoryError"
    assert packed.fingerprint.hash == plain.fingerprint.hash


def test_analysis_is_safe_on_many_threads_at_once():
    """The service analyses uploads on a thread pool: the pre-filter must not share
    scratch space between threads."""
    from concurrent.futures import ThreadPoolExecutor

    from kb.core.analyze import redacted_log

    log = TEMPLATE.format(prefix="/p", proc="Worker_TP0", pid=1, pid2=2, n1=1, n2=1, n3=1, n4=1, n5=1, n6=1,
                          gpu=0, size="1.00", date="01-01", time="00:00:00").encode() * 40
    expected = analyze(log).fingerprint.hash
    with ThreadPoolExecutor(max_workers=8) as pool:
        hashes = list(pool.map(lambda _: analyze(log).fingerprint.hash, range(32)))
        texts = list(pool.map(lambda _: redacted_log(log)[1], range(32)))
    assert set(hashes) == {expected}
    assert set(texts) == {0}
