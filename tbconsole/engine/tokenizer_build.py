"""Rebuild the shipped tokenizer (`tbconsole/engine/assets/tokenizer/`). A dev tool, not run at
engine start: `python -m tbconsole.engine.tokenizer_build [OUT_DIR]`.

Byte-level BPE (so any text round-trips exactly: shell, code, JSON, any Unicode), Qwen2/3's
pre-tokenizer split, no normalizer (Qwen applies NFC, which would break exact round trips), and
Qwen3.5's 33 special tokens with their spellings and special/non-special flags, so the cookbook's
`qwen3_5` renderer works on it unchanged. Trained on text that is on every machine with this
venv: the Python standard library, the venv's docs/configs/scripts and the bundled tasks.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

VOCAB_SIZE = 8192

# Qwen3.5's added tokens in id order. Those with special=False are ordinary added tokens in
# Qwen's tokenizer (kept by decode(skip_special_tokens=True)).
SPECIAL_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]

# Qwen2/Qwen3 pre-tokenizer pattern (single digits, contractions, punctuation runs, newlines).
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_CAPS = {  # bytes per source, so no one kind of text dominates the merges
    "stdlib_py": 6_000_000,
    "docs": 2_500_000,
    "config": 1_000_000,
    "shell": 1_000_000,
}


def _files(root: Path, patterns: list[str]) -> list[Path]:
    out: list[Path] = []
    for pat in patterns:
        out.extend(p for p in root.rglob(pat) if p.is_file())
    return sorted(set(out))


def _read_capped(paths: list[Path], cap: int) -> Iterator[str]:
    used = 0
    for p in paths:
        if used >= cap:
            return
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        text = text[:200_000]
        used += len(text)
        yield text


def corpus() -> Iterator[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    tasks = Path(__file__).resolve().parents[1] / "tasks"
    yield from _read_capped(
        [p for p in _files(stdlib, ["*.py"]) if "site-packages" not in p.parts and "test" not in p.parts],
        _CAPS["stdlib_py"],
    )
    yield from _read_capped(_files(site, ["*.md", "*.rst", "*.txt"]), _CAPS["docs"])
    yield from _read_capped(_files(site, ["*.json", "*.toml", "*.yaml", "*.yml", "*.cfg", "*.ini"]), _CAPS["config"])
    shell = _files(site, ["*.sh", "*.bash"]) + _files(Path("/etc"), ["*.sh"])
    yield from _read_capped(shell, _CAPS["shell"])
    if tasks.is_dir():
        yield from _read_capped(_files(tasks, ["*"]), 2_000_000)


def build(out_dir: Path) -> None:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    for text, special in SPECIAL_TOKENS:  # one at a time: ids follow the list order
        added = AddedToken(text, special=special, normalized=False)
        if special:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))


if __name__ == "__main__":
    default = Path(__file__).resolve().parent / "assets" / "tokenizer"
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
