"""An HF-style facade over a ``tml_renderers`` tokenizer, for the cookbook's renderers offline.

The cookbook's renderers call ``tokenizer.encode(text, add_special_tokens=False)`` and expect
HuggingFace semantics: added/special token strings in ``text`` (``<|im_start|>``, ``<think>``…)
become their single ids, unless ``split_special_tokens=True`` asks for them to be read as plain
text. ``tml_renderers`` tokenizers expose ``encode_ordinary`` (never special) and the list of
special strings; this adapter splits on those strings the way HF's added-token trie does.

``Qwen35Tokenizer`` is the real Qwen3.5 vocabulary; with this adapter the cookbook's ``qwen3_5``
renderer matches the native renderer token for token (see tests/proxy/test_tokenizer.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any


class HFStyleTokenizer:
    """``encode``/``decode`` with HuggingFace semantics over a ``tml_renderers`` tokenizer."""

    def __init__(self, tml_tokenizer: Any, name_or_path: str = "tml"):
        self.tml_tokenizer = tml_tokenizer
        self.name_or_path = name_or_path
        specials = list(tml_tokenizer.all_special_tokens)
        self._special_ids: dict[str, int] = {}
        for text in specials:
            ids = None
            for name in (text, text.removeprefix("<|").removesuffix("|>")):
                try:
                    ids = int(tml_tokenizer.encode_special(name))
                    break
                except Exception:  # noqa: BLE001 - the tokenizer raises its own error types
                    continue
            if ids is not None:
                self._special_ids[text] = ids
        # Longest first, so a special string that contains another wins (HF trie behaviour).
        alternatives = sorted(self._special_ids, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(s) for s in alternatives) + ")") if alternatives else None
        self.all_special_tokens = specials
        self.all_special_ids = list(self._special_ids.values())
        self.eos_token = "<|im_end|>" if "<|im_end|>" in self._special_ids else tml_tokenizer.eos_token
        self.eos_token_id = self._special_ids.get(self.eos_token)
        self.bos_token = tml_tokenizer.bos_token or None
        self.bos_token_id = None
        self.pad_token_id = self._special_ids.get("<|endoftext|>")

    @property
    def vocab_size(self) -> int:
        return max(self._special_ids.values(), default=0) + 1

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, add_special_tokens: bool = False, split_special_tokens: bool = False,
               **_: Any) -> list[int]:
        if split_special_tokens or self._split is None:
            return list(self.tml_tokenizer.encode_ordinary(text))
        out: list[int] = []
        ordinary = self.tml_tokenizer.encode_ordinary
        special = self._special_ids
        for i, piece in enumerate(self._split.split(text)):
            if not piece:
                continue
            if i % 2:
                out.append(special[piece])
            else:
                out.extend(ordinary(piece))
        return out

    def decode(self, token_ids: Sequence[int] | int, skip_special_tokens: bool = False, **_: Any) -> str:
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        ids = list(token_ids)
        if skip_special_tokens:
            specials = set(self._special_ids.values())
            ids = [t for t in ids if t not in specials]
        return str(self.tml_tokenizer.decode(ids))

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self._special_ids.get(token)


@functools.cache
def qwen35_tokenizer() -> HFStyleTokenizer:
    """The Qwen3.5 vocabulary (~248k ids), offline, loaded once per process (~3-5 s)."""
    from tml_renderers.tokenizers import Qwen35Tokenizer

    return HFStyleTokenizer(Qwen35Tokenizer(), name_or_path="Qwen/Qwen3.5")
