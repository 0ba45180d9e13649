"""The OpenAPI entries of the routes whose answer is negotiated (kb/web/negotiate.py)
list every form the answer may take: JSON, the text report and the web page, for the
route's own answers and its errors alike. Litestar documents one media type per answer;
without the others a client generated from the document (or a schema checker) takes a
text or HTML answer for a broken one."""

from __future__ import annotations

from dataclasses import dataclass

from litestar.openapi.spec import OpenAPIMediaType, OpenAPIResponse, OpenAPIType, Operation, Schema

OTHER_FORMS = ("text/plain", "text/html")


def add_other_forms(operation: Operation) -> None:
    for response in (operation.responses or {}).values():
        if isinstance(response, OpenAPIResponse) and response.content and "application/json" in response.content:
            for media_type in OTHER_FORMS:
                response.content.setdefault(media_type, OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)))


@dataclass
class NegotiatedOperation(Operation):
    """operation_class of a route that answers JSON, text or HTML."""

    def __post_init__(self) -> None:
        add_other_forms(self)
