"""Theme files → ``textual.theme.Theme``.

Every ``*.toml`` (or ``*.yaml`` when PyYAML is present) in the top-level ``themes/`` folder, in
``$TBCONSOLE_THEMES`` and in ``~/.config/tbconsole/themes`` is loaded at start. A file holds
Theme's fields (name, primary, secondary, accent, warning, error, success, foreground,
background, surface, panel, boost, dark) and an optional ``[variables]`` table; plots read
``plot-line``, ``plot-bar`` and ``plot-muted`` from there.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from textual.theme import Theme

DEFAULT_DARK = "tbconsole-dark"
DEFAULT_LIGHT = "tbconsole-light"
FIELDS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
          "surface", "panel", "boost")
REPO_THEMES = Path(__file__).resolve().parents[2] / "themes"

_FALLBACK = {
    DEFAULT_DARK: dict(primary="#5FA8D3", secondary="#7A8CA3", accent="#C792EA", warning="#E5B567",
                       error="#EF6B73", success="#7FC98B", foreground="#D8DEE9", background="#14181F",
                       surface="#1B2029", panel="#242B36", dark=True),
    DEFAULT_LIGHT: dict(primary="#1F6FB2", secondary="#5A6B82", accent="#8A3FB8", warning="#A86B00",
                        error="#C62834", success="#2E7D3A", foreground="#1E2430", background="#F7F8FA",
                        surface="#FFFFFF", panel="#E6EAF0", dark=False),
}


class ThemeFileError(ValueError):
    pass


def theme_dirs() -> list[Path]:
    dirs = [REPO_THEMES]
    if os.environ.get("TBCONSOLE_THEMES"):
        dirs.append(Path(os.environ["TBCONSOLE_THEMES"]))
    dirs.append(Path.home() / ".config" / "tbconsole" / "themes")
    return dirs


def theme_from_dict(body: dict, default_name: str) -> Theme:
    name = str(body.get("name") or default_name)
    if "primary" not in body:
        raise ThemeFileError(f"theme {name!r} has no 'primary' colour")
    kwargs = {k: str(body[k]) for k in FIELDS if body.get(k) is not None}
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
    themes = {name: Theme(name=name, **spec) for name, spec in _FALLBACK.items()}
    problems = []
    for folder in dirs if dirs is not None else theme_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix not in (".toml", ".yaml", ".yml"):
                continue
            try:
                theme = load_theme_file(path)
            except (OSError, ValueError, ThemeFileError) as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return themes, problems
