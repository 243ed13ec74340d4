"""Per-trial API keys.

A trial's key is HMAC-SHA256(the group's 256-bit secret, trial id), base64url without padding
(43 characters). It opens that trial's routes only: trial ids are guessable (``…-t3``), so with
one key per group any agent could post turns into a sibling's capture. Deriving the key keeps
nothing per trial to store, and lets a request for an unregistered trial be told "wrong key"
(401) from "no such trial" (404) without saying which trials exist to someone without a key.
Presented keys are compared in constant time; a key never appears in logs, events, captures or
``repr``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

_DOMAIN = b"tbconsole.proxy.trial-key\0"


class TrialKeys:
    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def __repr__(self) -> str:
        return "TrialKeys(secret=<hidden>)"

    def key(self, trial_id: str) -> str:
        return self._digest(trial_id).decode()

    def _digest(self, trial_id: str) -> bytes:
        mac = hmac.new(self._secret, _DOMAIN + trial_id.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=")

    def accepts(self, trial_id: str, headers: Mapping[str, str]) -> bool:
        """Whether a key the request presents (``x-api-key``, or ``Authorization: Bearer``) is
        this trial's."""
        expected = self._digest(trial_id)
        ok = False
        for value in presented(headers):
            # Every presented value is compared (no early exit): timing says nothing either way.
            ok |= hmac.compare_digest(value.encode("utf-8", "surrogatepass"), expected)
        return ok


def presented(headers: Mapping[str, str]) -> list[str]:
    out = []
    key = headers.get("x-api-key")
    if key is not None:
        out.append(key.strip())
    auth = headers.get("Authorization")
    if auth is not None:
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() == "bearer":
            out.append(value.strip())
    return out
