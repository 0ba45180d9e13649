"""What services raise for a request they cannot serve. The web layer maps each class to
one HTTP status in one place (kb/web/app.py); the CLI prints the message."""

from __future__ import annotations


class ServiceError(Exception):
    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidInput(ServiceError):
    """Missing, empty or malformed input (400). `field` names the input at fault when
    one is (`change.version`); the answer carries it as the validation errors do."""

    status_code = 400

    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.field = field


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    """The request contradicts the stored state, e.g. merging an incident into itself."""

    status_code = 409


class TooLarge(ServiceError):
    status_code = 413


class UnsupportedMediaType(ServiceError):
    status_code = 415


class NotText(ServiceError):
    """The upload is not a text log (binary, an archive, an image) (422)."""

    status_code = 422


class Unavailable(ServiceError):
    """The database did not answer in time (503, Retry-After)."""

    status_code = 503
