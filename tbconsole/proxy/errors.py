"""Errors the proxy returns, and their shape in each API.

A ``ProxyError`` carries an HTTP status and a message; ``openai_body``/``anthropic_body`` write
it the way that API's own servers do, so each client raises the exception its users expect:

* OpenAI: ``{"error": {"message", "type", "param", "code"}}``. A context-window refusal is 400
  with ``code="context_length_exceeded"`` and OpenAI's own wording ("This model's maximum context
  length is N tokens…"), which litellm maps to ``ContextWindowExceededError``.
* Anthropic: ``{"type": "error", "error": {"type", "message"}}``. A context-window refusal is 400
  ``invalid_request_error`` with "prompt is too long: N tokens > M maximum" (what Claude Code and
  litellm's Anthropic mapping recognise).

A sampler timeout is 504 (Anthropic's ``timeout_error``); an unsupported ``Content-Encoding`` 415.
"""

from __future__ import annotations

from typing import Any

ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}

OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


class ProxyError(Exception):
    """A request the proxy answers with an error (client mistake: 4xx; our side: 5xx)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        anthropic_message: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.anthropic_message = anthropic_message or message

    def openai_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": OPENAI_TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "server_error"),
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_body(self) -> dict[str, Any]:
        kind = ANTHROPIC_TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": self.anthropic_message}}


def bad_request(message: str, param: str | None = None) -> ProxyError:
    return ProxyError(400, message, param=param)


class ContextWindowExceeded(ProxyError):
    def __init__(self, prompt_tokens: int, max_tokens: int, window: int):
        total = prompt_tokens + max_tokens
        super().__init__(
            400,
            f"This model's maximum context length is {window} tokens. However, you requested {total} "
            f"tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). Please reduce "
            "the length of the messages or completion.",
            code="context_length_exceeded",
            param="messages",
            anthropic_message=f"prompt is too long: {total} tokens > {window} maximum",
        )
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.window = window
