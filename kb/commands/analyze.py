"""`kb analyze LOG`: the analysis core on a file or standard input."""

from __future__ import annotations

import click

from kb.commands.analysis import analyze_stream, open_log, render
from kb.core.textlog import LogRejected


@click.command()
@click.argument("log", type=click.Path(allow_dash=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (the analysis alone).")
@click.option("--no-kb", is_flag=True, help="Skip the known fixes from the bundled knowledge base.")
def analyze(log: str, as_json: bool, no_kb: bool) -> None:
    """Find the root cause, context and fingerprint of a crash log (`-` reads stdin),
    then the known fixes and recommendation from the bundled knowledge base (offline)."""
    try:
        stream = open_log(log)
    except OSError as exc:
        raise click.ClickException(f"cannot read {log}: {exc.strerror}") from None
    with stream:
        try:
            result = analyze_stream(stream)
        except LogRejected as exc:
            raise click.ClickException(f"{log}: {exc}") from None
    click.echo(render(result, as_json, advice=not no_kb))
