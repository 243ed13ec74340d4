"""aiohttp's server log, without a traceback for a request its HTTP parser refuses.

A request that is not valid HTTP (a bad request line, a duplicate ``Content-Length``, a header
over 8 KiB, broken chunked framing) never reaches a route: aiohttp answers it with its own
plain-text 400 and closes the connection, then logs the parser's exception with a traceback at
ERROR. That is a client mistake, so it is logged here as one line at INFO; everything else goes
to aiohttp's logger unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger("tbconsole.proxy")


class ServerLog:
    def __init__(self, inner: logging.Logger | None = None):
        self._inner = inner or logging.getLogger("aiohttp.server")

    def exception(self, msg: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            _refused(logging.INFO, exc_info)
        else:
            self._inner.exception(msg, *args, exc_info=exc_info, **kwargs)

    def debug(self, msg: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):  # aiohttp's choice for a bad first request line
            _refused(logging.DEBUG, exc_info)
        else:
            self._inner.debug(msg, *args, exc_info=exc_info, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _refused(level: int, exc: HttpProcessingError) -> None:
    detail = " ".join(str(exc.message).split())[:200]
    log.log(level, "capture proxy: refused a malformed HTTP request: %s: %s", type(exc).__name__, detail)
