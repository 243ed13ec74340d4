"""The model's tokenizer, read from disk (``tbconsole.common.tokenizerfile`` finds it) with the
``tokenizers`` library (no torch), as a ``TokenDecoder`` for the screens that decode tokens.
It takes a moment to load: screens ask for it off the UI thread.
"""

from __future__ import annotations

from tbconsole.common.tokenizerfile import tokenizer_path
from tbconsole.ui.present.token_text import TokenDecoder

_SHARED: dict[str | None, TokenDecoder] = {}  # a tokenizer loads once per model and process


def load_decoder(model_name: str | None) -> TokenDecoder:
    """The model's tokenizer as a ``TokenDecoder``; one that shows ids when none is found or it
    cannot be read."""
    path = tokenizer_path(model_name)
    if path is not None:
        try:
            from tokenizers import Tokenizer

            return TokenDecoder(Tokenizer.from_file(path))
        except Exception:  # noqa: BLE001 - any failure means: show ids
            pass
    return TokenDecoder(None)


def shared_decoder(model_name: str | None) -> TokenDecoder:
    """``load_decoder``'s, loaded once per model and kept for the process (the token view opens
    turn after turn)."""
    decoder = _SHARED.get(model_name)
    if decoder is None:
        decoder = _SHARED[model_name] = load_decoder(model_name)
    return decoder
