"""JSON bodies are taken at their declared types, strictly. Litestar converts a body in
lax mode (it must for query strings, where everything is text): `{"worked": 0}` becomes
false and `{"into": "5"}` becomes 5, so a client's type mistake would pass unnoticed.
`strict` converts the body again without leniency and answers 400 as validation does."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from litestar import Request
from litestar.exceptions import ValidationException

T = TypeVar("T")


async def strict(request: Request, data: T) -> T:
    """`data` (what Litestar made of the body) when the body has exactly its types."""
    try:
        msgspec.convert(await request.json(), type(data), strict=True, str_keys=True)
    except msgspec.ValidationError as exc:
        message = str(exc)
        key = message.rsplit("`$.", 1)[-1].rstrip("`") if "`$." in message else None
        raise ValidationException(detail=f"Validation failed for {request.method} {request.url.path}",
                                  extra=[{"message": message, "key": key, "source": "body"}]) from None
    return data
