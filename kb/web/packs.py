"""Knowledge packs over the API, for admins (a token when KB_API_TOKENS is set, for the
export too: it holds the team's whole curation): GET /export answers a tar.gz of seed
files, POST /import merges one (kb.services.packs)."""

from __future__ import annotations

import re

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated as Q

from litestar import Request, Response, get, post
from litestar.datastructures import State, UploadFile
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import QueryParameter

from kb.services import packs
from kb.services.errors import InvalidInput, TooLarge
from kb.web.api import (
    WRITE_ERRORS,
    compute_in_thread,
    db_of,
    errors,
    in_thread,
    require_token,
    settings_of,
)

PACK_FIELD = "pack"


@dataclass(slots=True)
class ImportAnswer:
    """POST /import: what the import added, changed, kept, and one line per event."""

    summary: str
    changed: bool
    lines: list[str]
    report: packs.ImportReport


# `12,15`, `#12, #15`: what _ids reads, as the document states it (ASCII digits only:
# int() alone would also take `1_2` and other scripts' digits)
# numbers 1 .. 10**18 - 1 (ids stay below 2**63), leading zeros allowed: what the pattern
# admits, the server accepts (the fuzzer holds the document to that)
_NUMBER = r"#?0*[1-9][0-9]{0,17}\s*"
ID_LIST = rf"^\s*({_NUMBER})?(,\s*({_NUMBER})?)*$"
_ID_LIST = re.compile(ID_LIST)


def _ids(value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        if not _ID_LIST.match(value):
            raise ValueError(value)
        ids = [int(v.strip().lstrip("#")) for v in value.split(",") if v.strip()]
    except ValueError:
        raise InvalidInput("incidents: give incident numbers separated by commas, e.g. 12,15",
                           field="incidents") from None
    return ids


@get("/export", guards=[require_token], tags=["curation"], media_type="application/gzip",
     summary="Export incidents, fixes, outcomes and chains as a tar.gz of seed files",
     description="One YAML file per incident (`<engine>/<slug>.yaml`, the schema of "
                 "seeds/README.md), loadable by POST /import, `kb import` or `kb seed --path`. "
                 "An incident created by uploads gets its slug at its first export.",
     responses={200: ResponseSpec(bytes, description="a tar.gz of the seed files",
                                  media_type="application/gzip", generate_examples=False),
                **errors(*WRITE_ERRORS, 404)})
async def export_pack(state: State, incidents: Q[str | None, QueryParameter(
        description="only these incidents: numbers separated by commas",
        schema_extra={"pattern": ID_LIST})] = None) -> Response[bytes]:
    files = await in_thread(state, packs.export_pack, db_of(state), _ids(incidents),
                            settings_of(state).seeds_dir)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Response(packs.pack_archive(files), media_type="application/gzip", headers={
        "Content-Disposition": f'attachment; filename="crash-kb-pack-{stamp}.tar.gz"'})


async def _pack_bytes(request: Request, limit: int) -> bytes:
    """The pack: a multipart field `pack`, or the raw body (tar.gz, tar or zip)."""
    if (request.headers.get("content-type") or "").startswith("multipart/form-data"):
        form = await request.form()
        upload = form.get(PACK_FIELD)
        if not isinstance(upload, UploadFile):
            raise InvalidInput(f"send the pack in the multipart field `{PACK_FIELD}`", field=PACK_FIELD)
        data = await upload.read(limit + 1)
    else:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        if size > limit:
            data += b"\0"
    if len(data) > limit:
        raise TooLarge(f"the pack is larger than {limit // (1024 * 1024)} MB (KB_MAX_UPLOAD_MB)")
    if not data:
        raise InvalidInput("send a pack: a tar.gz or zip of seed YAML files", field=PACK_FIELD)
    return data


@post("/import", guards=[require_token], tags=["curation"], status_code=200,
      request_max_body_size=None,
      summary="Import a pack (tar.gz or zip of seed files) into the knowledge base",
      description="Adds what is new, updates what changed, keeps what a person edited here "
                  "(reported as a conflict) unless `overwrite=true`. A bad file is refused "
                  "(400) naming the file and the field, and nothing is written.",
      responses={**errors(*WRITE_ERRORS, 413)})
async def import_pack(request: Request, state: State, overwrite: Q[bool, QueryParameter(
        description="take the pack's value where a person edited the incident or fix here")] = False
                      ) -> ImportAnswer:
    limit = settings_of(state).max_upload_bytes
    files = packs.read_archive(await _pack_bytes(request, limit), limit)
    prepared = await compute_in_thread(state, packs.prepare_pack, files)
    report = await in_thread(state, packs.apply_pack, db_of(state), prepared, overwrite=overwrite)
    return ImportAnswer(summary=report.summary(), changed=report.did_change, lines=report.lines(),
                        report=report)


ROUTES = [export_pack, import_pack]
