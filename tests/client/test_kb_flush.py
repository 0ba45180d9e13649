"""`kb flush` and the spool: nothing lost, nothing sent twice, 4xx not retried forever."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from client_helpers import KB, free_port, run_kb, spool_entries

from kb.client.spool import Spool, new_idempotency_key


def spool_for(env: dict[str, str]) -> Spool:
    return Spool(Path(env["KB_SPOOL_DIR"]))


def add_entries(env: dict[str, str], count: int) -> list[tuple[str, bytes]]:
    spool = spool_for(env)
    added = []
    for number in range(count):
        log = f"(VllmWorker TP0 pid={100 + number}) ERROR x [y.py:1] ValueError: case {number}\n".encode()
        key = new_idempotency_key()
        spool.add(log, {"command": f"vllm serve m{number}", "exit_code": "1"}, idempotency_key=key, source="test")
        added.append((key, log))
    return added


def test_spool_entries_appear_whole_and_in_order(tmp_path):
    spool = Spool(tmp_path / "spool")
    first = spool.add(b"one\n", {"exit_code": "1"}, idempotency_key="k1", source="test")
    source = tmp_path / "x.log"
    source.write_bytes(b"two\n")
    second = spool.add(source, {}, idempotency_key="k2", source="test")
    assert source.read_bytes() == b"two\n"  # copied, never moved
    assert [e.id for e in spool.entries()] == [first.id, second.id]
    assert first.log_path.read_bytes() == b"one\n" and second.log_path.read_bytes() == b"two\n"
    assert first.read_meta()["fields"] == {"exit_code": "1"}
    assert not [p for p in spool.root.iterdir() if p.name.startswith(".")]  # no temp leftovers
    assert oct(spool.root.stat().st_mode & 0o777) == "0o700"


def test_an_entry_lock_is_exclusive_and_sees_removal(tmp_path):
    spool = Spool(tmp_path / "spool")
    entry = spool.add(b"x\n", {}, idempotency_key="k", source="test")
    with entry.lock() as first:
        with entry.lock() as second:
            assert first is True and second is False
        entry.remove()
    with entry.lock() as after:
        assert after is False
    assert spool.entries() == []


def test_retries_with_backoff_keep_the_same_idempotency_key(kb_env, standin):
    server = standin("--fail-first", "2")
    [(key, log)] = add_entries(kb_env, 1)
    done = run_kb(["flush", "--server", server.url, "--backoff", "0.05"], kb_env)
    assert done.returncode == 0, done.stderr
    uploads = server.uploads()
    assert [u["answered"] for u in uploads] == [503, 503, 201]
    assert {u["idempotency_key"] for u in uploads} == {key}
    assert uploads[-1]["log"] == log.decode()
    assert spool_entries(kb_env) == []


def test_server_still_down_keeps_everything(kb_env):
    add_entries(kb_env, 3)
    url = f"http://127.0.0.1:{free_port()}"
    done = run_kb(["flush", "--server", url, "--retries", "1", "--backoff", "0.01"], kb_env)
    assert done.returncode == 1
    stderr = done.stderr.decode()
    assert "0 sent, 3 left" in stderr and "stopped early: cannot reach" in stderr
    entries = spool_entries(kb_env)
    assert len(entries) == 3
    # Only the first entry was tried; the flush stopped instead of waiting on each.
    attempts = [json.loads((e / "meta.json").read_text())["attempts"] for e in entries]
    assert attempts == [2, 0, 0]


def test_a_refused_log_is_kept_reported_and_not_retried_forever(kb_env, standin):
    server = standin("--status", "422")
    add_entries(kb_env, 1)
    first = run_kb(["flush", "--server", server.url, "--backoff", "0.01"], kb_env)
    assert first.returncode == 1
    assert "refused by the server: HTTP 422" in first.stdout.decode()
    assert len(server.uploads()) == 1  # a 4xx is not retried

    second = run_kb(["flush", "--server", server.url], kb_env)
    assert second.returncode == 1
    assert "refused earlier" in second.stdout.decode() and "--retry-rejected" in second.stdout.decode()
    assert len(server.uploads()) == 1
    assert len(spool_entries(kb_env)) == 1

    listed = run_kb(["flush", "--list"], kb_env)
    assert "refused: HTTP 422" in listed.stdout.decode()

    fixed = standin()  # e.g. after a server upgrade
    third = run_kb(["flush", "--server", fixed.url, "--retry-rejected"], kb_env)
    assert third.returncode == 0
    assert len(fixed.uploads()) == 1 and spool_entries(kb_env) == []


def test_a_wrong_token_stops_the_flush_and_keeps_the_logs(kb_env, standin):
    server = standin("--token", "right")
    add_entries(kb_env, 2)
    wrong = run_kb(["flush", "--server", server.url, "--token", "wrong"], kb_env)
    assert wrong.returncode == 1
    assert len(server.uploads()) == 1 and len(spool_entries(kb_env)) == 2
    right = run_kb(["flush", "--server", server.url], dict(kb_env, KB_TOKEN="right"))
    assert right.returncode == 0
    assert [u["answered"] for u in server.uploads()] == [401, 201, 201]
    assert spool_entries(kb_env) == []


def test_a_lost_answer_is_resent_with_the_same_key(kb_env, standin):
    """The server stored the log but its answer never arrived (client timeout): the
    retry carries the same Idempotency-Key, so the service can answer without storing
    it twice (the stand-in replays its first answer, as the real service should)."""
    server = standin("--delay", "3", "--delay-first", "1")
    [(key, _)] = add_entries(kb_env, 1)
    lost = run_kb(["flush", "--server", server.url, "--timeout", "0.5", "--retries", "0"], kb_env)
    assert lost.returncode == 1 and len(spool_entries(kb_env)) == 1
    again = run_kb(["flush", "--server", server.url, "--timeout", "10"], kb_env, timeout=60)
    assert again.returncode == 0, again.stderr
    uploads = server.uploads()
    assert [u["idempotency_key"] for u in uploads] == [key, key]
    assert [u["replay"] for u in uploads] == [False, True]
    assert spool_entries(kb_env) == []


def test_two_flushes_at_once_send_each_log_exactly_once(kb_env, standin):
    server = standin("--delay", "0.2")
    added = add_entries(kb_env, 6)
    flushes = [
        subprocess.Popen([*KB, "flush", "--server", server.url], env=kb_env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        for _ in range(2)
    ]
    for process in flushes:
        process.communicate(timeout=60)
        assert process.returncode == 0
    keys = [u["idempotency_key"] for u in server.uploads()]
    assert sorted(keys) == sorted(key for key, _ in added)  # each once, none missing
    assert spool_entries(kb_env) == []


def test_an_interrupted_deletion_is_finished_without_resending(kb_env, standin):
    server = standin()
    spool = spool_for(kb_env)
    entry = spool.add(b"ValueError: x\n", {}, idempotency_key="k", source="test")
    meta = entry.read_meta()
    meta["delivered"] = True  # the server confirmed it, then kb died before deleting
    entry.write_meta(meta)
    done = run_kb(["flush", "--server", server.url], kb_env)
    assert done.returncode == 0
    assert server.uploads() == [] and spool_entries(kb_env) == []
