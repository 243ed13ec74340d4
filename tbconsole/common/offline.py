"""Environment defaults that keep third-party libraries from reaching for the network.

Set before those libraries are imported: litellm downloads its model cost map at import and
retries for seconds when offline. Only defaults — a user's explicit setting wins.
"""

import os

SAFE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    # The cookbook draws tqdm bars on stderr; they garble the progress log and the console.
    # tqdm reads this when it is imported, so it is set with the package.
    "TQDM_DISABLE": "1",
}

# For the embedded default (local engine, bundled tasks): nothing is fetched from a hub.
EMBEDDED_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TINKER_TELEMETRY": "0",
}


def apply_safe_defaults() -> None:
    for key, value in SAFE_DEFAULTS.items():
        os.environ.setdefault(key, value)


def apply_embedded_defaults() -> None:
    apply_safe_defaults()
    for key, value in EMBEDDED_DEFAULTS.items():
        os.environ.setdefault(key, value)
