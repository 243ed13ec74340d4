"""The console's settings kept per user from one console to the next (today: the theme last chosen).

One small JSON file, ``console.json``, in the user's tbconsole folder: ``$XDG_CONFIG_HOME/tbconsole``
when that is set to an absolute path (as the XDG spec asks), else ``~/.config/tbconsole``, the
folder that already holds the user's own themes (``themes/``: ``tbconsole.ui.themes``). Never a
temporary folder: it must outlive the machine's restarts. Written whole (``tbconsole.common.atomic``):
two consoles closing at once leave one file or the other, never half of one. A missing,
unreadable or hand-broken file is no error: the defaults apply; failing to write it (a read-only
home) loses the setting, never the console.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from tbconsole.common import atomic

SETTINGS_FILE = "console.json"


def config_dir() -> Path:
    """The user's tbconsole folder (not created here)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "tbconsole"


def settings_file() -> Path:
    return config_dir() / SETTINGS_FILE


def read_settings() -> dict[str, Any]:
    """What the file holds, or nothing (no file, not JSON, not a table)."""
    try:
        body = json.loads(settings_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def write_setting(key: str, value: Any) -> bool:
    """Keep ``key`` = ``value`` (the file's other settings stay); False when it could not be written."""
    settings = read_settings()
    if settings.get(key) == value:
        return True
    settings[key] = value
    with contextlib.suppress(OSError):
        atomic.write_json(settings_file(), settings)
        return True
    return False


def remembered_theme() -> str | None:
    """The theme chosen last (a name; it may no longer exist), or None."""
    theme = read_settings().get("theme")
    return theme if isinstance(theme, str) and theme else None


def remember_theme(name: str) -> bool:
    return write_setting("theme", name)
