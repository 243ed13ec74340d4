"""Errors that become HTTP 4xx replies (or failed futures) with a message the SDK shows."""

from __future__ import annotations

from typing import ClassVar


class EngineError(Exception):
    """A request the engine refuses. `status` is the HTTP status used when refused at submit;
    `headers` go with that reply."""

    status = 400
    category = "user"
    headers: ClassVar[dict[str, str]] = {}

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
    """A promise the engine no longer has. Under the tinker contract: it restarted, and only for
    requests safe to run again (sampling), which the SDK re-sends. Under the Miles contracts
    (`contract.py`): any future unknown, expired or reaped; the SDK raises it to the caller."""

    status = 410


class Unprocessable(EngineError):
    """The same request identity (model, seq_id) with a different payload (Miles contracts).
    Never 409, which the SDK retries."""

    status = 422


class UnsupportedMedia(EngineError):
    """A body in a format this contract does not serve (protobuf forward_backward under `miles`)."""

    status = 415


class TooManyRequests(EngineError):
    """Backpressure (Miles contracts): the SDK backs off and sends the identical request again."""

    status = 429
    headers: ClassVar[dict[str, str]] = {"Retry-After": "1"}


class NotReady(EngineError):
    """The service is up but not ready for SDK traffic yet (healthz while starting)."""

    status = 503


class TooLarge(EngineError):
    """Refused by a token budget: cheaper to refuse than to run out of memory."""

    status = 413
