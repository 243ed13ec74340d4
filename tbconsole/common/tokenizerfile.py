"""Which ``tokenizer.json`` to load for a model. Plain Python: it only looks for the file.

The console decodes captured token ids with it and the synthetic runs encode their replies with
it, so a recorded run and a synthetic one show the same tokens.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

# The local engine's bundled tokenizer: found whatever the model, when nothing better is.
BUNDLED_TOKENIZER = Path(__file__).resolve().parents[1] / "engine" / "assets" / "tokenizer" / "tokenizer.json"


def tokenizer_path(model_name: str | None) -> str | None:
    """A ``tokenizer.json`` for the model: ``$TBCONSOLE_TOKENIZER``, the Hugging Face cache, or
    the local engine's bundled tokenizer (whichever is found first)."""
    candidates = []
    if os.environ.get("TBCONSOLE_TOKENIZER"):
        candidates.append(os.environ["TBCONSOLE_TOKENIZER"])
    if model_name and "/" in model_name:
        hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub"
        )
        org, name = model_name.split("/", 1)
        candidates += sorted(glob.glob(os.path.join(hub, f"models--{org}--{name}", "snapshots", "*", "tokenizer.json")))
    candidates.append(str(BUNDLED_TOKENIZER))
    return next((path for path in candidates if os.path.isfile(path)), None)
