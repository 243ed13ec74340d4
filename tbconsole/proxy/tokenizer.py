"""An HF-style facade over a ``tml_renderers`` tokenizer, for the cookbook's renderers offline.

The cookbook's renderers call ``tokenizer.encode(text, add_special_tokens=False)`` and expect
HuggingFace semantics: added/special token strings in ``text`` (``<|im_start|>``, ``<think>``…)
become their single ids, unless ``split_special_tokens=True`` asks for them to be read as plain
text. ``tml_renderers`` tokenizers expose ``encode_ordinary`` (never special) and the list of
special strings; this adapter splits on those strings the way HF's added-token trie does.

``Qwen35Tokenizer`` is the real Qwen3.5 vocabulary; with this adapter the cookbook's ``qwen3_5``
renderer matches the native renderer token for token (see tests/proxy/test_tokenizer.py).

Long texts are encoded in pieces of at most ``MAX_ENCODE_CHARS``: the tokenizer's pre-tokenizer
(a backtracking regex) fails on a run of one character class of some 0.5M characters ("Max stack
size exceeded for backtracking"), and one call holds the GIL throughout (~0.13 s per MB), which
would stall the event loop even with rendering on another thread. Pieces end where the
pre-tokenizer always ends a pre-token (see ``split_points``), so ordinary text encodes to
exactly the tokens of one call; only a run with no such point in 16k characters is cut
mid-run (its tokens still decode to the same text).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

MAX_ENCODE_CHARS = 32 * 1024

# Candidates for a piece boundary (checked by _safe): after a line break before a letter, or
# after a letter before a non-letter.
_CANDIDATE = re.compile(r"(?<=[\r\n])(?=[^\W\d_])|(?<=[^\W\d_])(?=[^\w']|\d)")


def _safe(text: str, i: int) -> bool:
    """Whether GPT-style pre-tokenizers (cl100k, o200k, Qwen, GLM…) always end a pre-token
    between ``text[i-1]`` and ``text[i]``, whatever surrounds them: none of their patterns
    continues a line break into a letter, or a run of letters into a character that is not a
    letter, a combining mark or the ``'`` of a contraction (``'s``); and none looks behind.
    tests/proxy/test_long_prompts.py checks it at every such point of random strings."""
    before, after = text[i - 1], text[i]
    if before in "\r\n":
        return after.isalpha()
    return before.isalpha() and not after.isalpha() and after != "'" and not unicodedata.category(after).startswith("M")


def split_points(text: str, max_chars: int = MAX_ENCODE_CHARS) -> list[int]:
    """Where to cut ``text`` into pieces of at most ``max_chars``: the last safe point of each
    window's second half (its last 1k characters searched first, as they nearly always hold one),
    else the window's end."""
    points = []
    start, n = 0, len(text)
    while n - start > max_chars:
        end = start + max_chars
        cut = None
        for lo in (max(start + max_chars // 2, end - 1024), start + max_chars // 2):
            for match in _CANDIDATE.finditer(text, lo, end + 1):
                if lo < match.start() <= end and _safe(text, match.start()):
                    cut = match.start()
            if cut is not None:
                break
        start = cut if cut is not None else end
        points.append(start)
    return points


def encode_in_pieces(encode, text: str, max_chars: int = MAX_ENCODE_CHARS) -> list[int]:
    if len(text) <= max_chars:
        return list(encode(text))
    out: list[int] = []
    start = 0
    for point in [*split_points(text, max_chars), len(text)]:
        out.extend(encode(text[start:point]))
        start = point
    return out


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

    def encode(
        self, text: str, add_special_tokens: bool = False, split_special_tokens: bool = False, **_: Any
    ) -> list[int]:
        ordinary = self.tml_tokenizer.encode_ordinary
        if split_special_tokens or self._split is None:
            return encode_in_pieces(ordinary, text)
        out: list[int] = []
        special = self._special_ids
        for i, piece in enumerate(self._split.split(text)):
            if not piece:
                continue
            if i % 2:
                out.append(special[piece])
            else:
                out.extend(encode_in_pieces(ordinary, piece))
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
