"""`kb search` and `kb show`: browse the knowledge base from a terminal, through the
public client (kb.Client). Readable by default (the report curl gets, kb.textreport);
`--json` prints the service's JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

import click
import msgspec

from kb import textreport
from kb.client.commands import server_option, timeout_option, token_option
from kb.client.deliver import say
from kb.core.records import PHASES


def _client(server: str, token: str | None, timeout: float) -> Any:
    from kb.client.api import Client

    try:
        return Client(server, token, timeout=timeout, retries=2, backoff=0.5)
    except ValueError as exc:
        say(str(exc))
        raise SystemExit(1) from None


def _print(record: Any, as_json: bool, report: Any, server: str) -> None:
    data = msgspec.to_builtins(record)
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        click.echo(report(data, base_url=server), nl=False)


@click.command()
@server_option
@token_option
@timeout_option
@click.option("--engine", help="vllm, sglang, tensorrt-llm, tgi, pytorch, ...")
@click.option("--version", "engine_version", metavar="VERSION", help="Engine version seen or affected.")
@click.option("--model-arch", metavar="TYPE", help="HF model_type, e.g. deepseek_v3.")
@click.option("--gpu", metavar="NAME", help="GPU name (substring) or family.")
@click.option("--phase", type=click.Choice(PHASES), help="Crash phase.")
@click.option("--tag", help="A tag.")
@click.option("--has-fix/--no-fix", default=None, help="Only incidents with (or without) a fix.")
@click.option("--view", type=click.Choice(["seen_here", "seeded", "needs_triage"]),
              help="Uploaded here / curated and never seen here / cause not captured.")
@click.option("--sort", type=click.Choice(["last_seen", "occurrences", "relevance"]), default="last_seen",
              show_default=True)
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--per-page", type=click.IntRange(1, 200), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON answer.")
@click.argument("query", required=False)
def search(server: str, token: str | None, upload_timeout: float, engine: str | None,
           engine_version: str | None, model_arch: str | None, gpu: str | None,
           phase: str | None, tag: str | None, has_fix: bool | None, view: str | None, sort: str,
           page: int, per_page: int, as_json: bool, query: str | None) -> None:
    """Search the incidents of a Crash KB service (QUERY: words of a title, signature,
    summary or notes, or text their stored logs printed: a path, a symbol). Exit status:
    0 answered, 1 refused or unreachable."""
    from kb.client.errors import ClientError

    with _client(server, token, upload_timeout) as client:
        try:
            listing = client.search(query, engine=engine, version=engine_version, model_arch=model_arch,
                                    gpu=gpu, phase=phase, tag=tag, has_fix=has_fix, sort=sort,
                                    page=page, per_page=per_page, view=view)
        except ClientError as exc:
            say(str(exc))
            raise SystemExit(1) from None
        _print(listing, as_json, textreport.list_report, client.url)


@click.command()
@server_option
@token_option
@timeout_option
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON answer.")
@click.argument("incident_id", type=click.IntRange(min=1, max=2**63 - 1), metavar="ID")
def show(server: str, token: str | None, upload_timeout: float, as_json: bool, incident_id: int) -> None:
    """Show one incident: what it is, the recommendation, every fix with its exact
    change, recent occurrences and links. Exit status: 0 shown, 1 not found, refused or
    unreachable."""
    from kb.client.errors import ClientError

    with _client(server, token, upload_timeout) as client:
        try:
            detail = client.incident(incident_id)
        except ClientError as exc:
            say(str(exc))
            raise SystemExit(1) from None
        _print(detail, as_json, textreport.incident_report, client.url)
