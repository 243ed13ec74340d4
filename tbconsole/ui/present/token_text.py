"""Token ids as text, for colouring a turn by log-prob and for capture lines without text. A
``TokenDecoder`` wraps a tokenizer that is already loaded (``tbconsole.ui.data.tokenizer`` loads
the model's); without one, ids are shown.
"""

from __future__ import annotations

from typing import Any


class TokenDecoder:
    """Token id → text with a ``tokenizers`` tokenizer (None: ids are shown, as ``⟨id⟩``)."""

    def __init__(self, tokenizer: Any = None):
        self._tok = tokenizer
        self._cache: dict[int, str] = {}

    @property
    def available(self) -> bool:
        return self._tok is not None

    def piece(self, token: int) -> str:
        text = self._cache.get(token)
        if text is None:
            if self._tok is None:
                text = f"⟨{token}⟩"
            else:
                try:
                    text = self._tok.decode([token], skip_special_tokens=False)
                except Exception:  # noqa: BLE001
                    text = f"⟨{token}⟩"
            self._cache[token] = text
        return text

    def decode(self, tokens: list[int] | tuple[int, ...]) -> str:
        """A whole output as text (pieces decoded one by one would split multi-byte characters)."""
        if self._tok is not None:
            try:
                return str(self._tok.decode(list(tokens), skip_special_tokens=False))
            except Exception:  # noqa: BLE001
                pass
        return "".join(self.piece(t) for t in tokens)
