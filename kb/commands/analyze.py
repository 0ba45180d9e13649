"""`kb analyze LOG`: the analysis core on a file or standard input."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from kb.commands.report import format_analysis
from kb.core import scan
from kb.core.analyze import Analyzer

CHUNK = 16 * 1024 * 1024


def _cache_dir() -> Path | None:
    try:
        from platformdirs import user_cache_dir

        return Path(os.environ.get("KB_CACHE_DIR") or user_cache_dir("crash-kb"))
    except Exception:  # no home directory: compile every time
        return None


@click.command()
@click.argument("log", type=click.Path(allow_dash=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def analyze(log: str, as_json: bool) -> None:
    """Find the root cause, context and fingerprint of a crash log (`-` reads stdin)."""
    scan.use_cache(_cache_dir())
    analyzer = Analyzer()
    try:
        stream = sys.stdin.buffer if log == "-" else open(log, "rb")
    except OSError as exc:
        raise click.ClickException(f"cannot read {log}: {exc.strerror}") from None
    buffer = bytearray(CHUNK)  # one buffer, refilled: the analyzer keeps no reference to it
    with stream:
        while size := stream.readinto(buffer):
            analyzer.feed(buffer if size == CHUNK else buffer[:size])
    result = analyzer.finish()
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(format_analysis(result))
