"""Theme files → ``textual.theme.Theme``.

Themes are loaded at start from these folders, later ones overriding earlier ones by name:

1. the shipped themes, ``themes/`` at the repository's top (tbconsole-dark, tbconsole-light), package
   data through the link ``tbconsole/ui/theme_files``;
2. ``$TBCONSOLE_THEMES``, when set;
3. ``~/.config/tbconsole/themes`` — the place for your own themes.

Every ``*.toml`` (or ``*.yaml`` / ``*.yml`` when PyYAML is present) there is one theme. A file
holds Theme's fields (name, primary, secondary, accent, warning, error, success, foreground,
background, surface, panel, boost, dark) and an optional ``[variables]`` table; plots read
``plot-line``, ``plot-bar`` and ``plot-muted`` from there, and panel borders are drawn in
``panel-lighten-2`` (a light theme sets it: lightening a light panel gives white, unseen on a
light background). Select one with ``--theme NAME`` or the command palette.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from textual.theme import Theme

DEFAULT_DARK = "tbconsole-dark"
DEFAULT_LIGHT = "tbconsole-light"
FIELDS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
THEME_SUFFIXES = (".toml", ".yaml", ".yml")
SHIPPED_THEMES = Path(__file__).with_name("theme_files")
REPO_THEMES = SHIPPED_THEMES  # former name, before the files became package data
USER_THEMES = Path.home() / ".config" / "tbconsole" / "themes"


class ThemeFileError(ValueError):
    pass


def theme_dirs() -> list[Path]:
    dirs = [SHIPPED_THEMES]
    if os.environ.get("TBCONSOLE_THEMES"):
        dirs.append(Path(os.environ["TBCONSOLE_THEMES"]))
    dirs.append(USER_THEMES)
    return dirs


def theme_from_dict(body: dict, default_name: str) -> Theme:
    name = str(body.get("name") or default_name)
    if "primary" not in body:
        raise ThemeFileError(f"theme {name!r} has no 'primary' colour")
    kwargs: dict[str, Any] = {k: str(body[k]) for k in FIELDS if body.get(k) is not None}
    variables = {str(k): str(v) for k, v in (body.get("variables") or {}).items()}
    return Theme(name=name, dark=bool(body.get("dark", True)), variables=variables, **kwargs)


def load_theme_file(path: Path) -> Theme:
    if path.suffix == ".toml":
        body = tomllib.loads(path.read_text(encoding="utf-8"))
    else:
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ThemeFileError(f"{path}: YAML themes need PyYAML") from exc
        body = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(body, dict):
        raise ThemeFileError(f"{path}: not a table of theme fields")
    try:
        return theme_from_dict(body, path.stem)
    except (TypeError, ValueError) as exc:
        raise ThemeFileError(f"{path}: {exc}") from exc


def load_themes(dirs: list[Path] | None = None) -> tuple[dict[str, Theme], list[str]]:
    """All themes found (later folders override earlier ones by name) and problems met."""
    themes: dict[str, Theme] = {}
    problems = []
    for folder in dirs if dirs is not None else theme_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix not in THEME_SUFFIXES:
                continue
            try:
                theme = load_theme_file(path)
            except (OSError, ValueError) as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return themes, problems
