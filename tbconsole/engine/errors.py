"""Errors that become HTTP 4xx replies (or failed futures) with a message the SDK shows."""

from __future__ import annotations


class EngineError(Exception):
    """A request the engine refuses. `status` is the HTTP status used when refused at submit."""

    status = 400
    category = "user"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadRequest(EngineError):
    status = 400


class NotFound(EngineError):
    status = 404


class Conflict(EngineError):
    # Not 409: the SDK retries 408/409/429/5xx for up to five minutes.
    status = 400


class Gone(EngineError):
    """A promise the engine no longer has (it restarted): the SDK re-sends the original request.
    Only for requests that are safe to run again (sampling)."""

    status = 410


class TooLarge(EngineError):
    """Refused by a token budget: cheaper to refuse than to run out of memory."""

    status = 413
