"""docker/: no Docker engine runs here, so check the wiring by reading the files."""

from __future__ import annotations

import re
import shlex

import yaml
from client_helpers import REPO

DOCKER = REPO / "docker"
SERVE_CHAIN = "kb db upgrade && kb seed && exec kb serve --host 0.0.0.0 --port 8000"


def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (DOCKER / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_compose_service_waits_for_a_healthy_postgres():
    services = compose()["services"]
    db, kb = services["db"], services["kb"]
    assert db["image"].startswith("postgres:16")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert kb["depends_on"]["db"]["condition"] == "service_healthy"
    for check in (db["healthcheck"], kb["healthcheck"]):
        assert check["interval"] and check["retries"] >= 1


def test_compose_service_talks_to_that_postgres():
    services = compose()["services"]
    db_env, kb_env = services["db"]["environment"], services["kb"]["environment"]
    url = kb_env["KB_DATABASE_URL"]
    assert url.startswith("postgresql+psycopg://")
    match = re.fullmatch(r"postgresql\+psycopg://([^:]+):([^@]+)@([^:/]+):5432/(\w+)", url)
    assert match, url
    user, password, host, database = match.groups()
    assert host == "db"
    assert user == db_env["POSTGRES_USER"] and database == db_env["POSTGRES_DB"]
    assert password == db_env["POSTGRES_PASSWORD"]  # the same ${KB_DB_PASSWORD:-kb}


def test_compose_migrates_seeds_and_serves_on_every_start():
    kb = compose()["services"]["kb"]
    assert kb["command"][:2] == ["sh", "-c"] and kb["command"][2] == SERVE_CHAIN
    assert "/healthz" in " ".join(kb["healthcheck"]["test"])
    # published on the host's loopback unless the user says otherwise
    [port] = kb["ports"]
    assert port == "${KB_BIND:-127.0.0.1}:${KB_HOST_PORT:-8000}:8000"
    assert kb["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}


def test_compose_keeps_the_database_in_a_named_volume():
    document = compose()
    assert "pgdata" in document["volumes"]
    assert "pgdata:/var/lib/postgresql/data" in document["services"]["db"]["volumes"]


def test_dockerfile_is_slim_non_root_healthchecked_and_serves_the_chain():
    instructions = dockerfile_instructions()
    words = [word for word, _ in instructions]
    args = dict(instructions)  # last of each kind
    assert instructions[0] == ("FROM", "python:3.11-slim")
    assert any(word == "RUN" and "pip install ." in rest for word, rest in instructions)
    assert args["USER"] not in ("root", "0") and words.index("USER") > words.index("RUN")
    assert "/healthz" in args["HEALTHCHECK"]
    assert "KB_SEEDS_DIR=/app/seeds" in args["ENV"] and "KB_DATA_DIR=/data" in args["ENV"]
    assert args["CMD"] == f'["sh", "-c", "{SERVE_CHAIN}"]'
    assert args["EXPOSE"] == "8000"


def test_dockerfile_copies_paths_that_exist():
    context = REPO  # compose builds with context `..` from docker/
    for word, rest in dockerfile_instructions():
        if word != "COPY":
            continue
        *sources, _target = shlex.split(rest)
        for source in sources:
            assert not source.startswith("--"), "no COPY flags expected"
            assert (context / source).exists(), f"Dockerfile copies {source}, which is missing from the repository"
    assert (context / "kb" / "cli.py").exists()
    assert (context / "seeds").is_dir()
