"""The theme the console starts with, and the one it keeps for next time."""

from __future__ import annotations

from typing import Any

from textual.app import App

from tbconsole.ui.data.settings import remember_theme, remembered_theme, settings_file
from tbconsole.ui.themes import DEFAULT_DARK, DEFAULT_LIGHT, load_themes

THEME_ALIASES = {"dark": DEFAULT_DARK, "light": DEFAULT_LIGHT}


class ThemeChoice:
    """The loaded themes, registered with ``app``, and the one it starts with: the one asked for,
    else (``remember``: a user's console: attach, train, demo) the one chosen last time, else the
    default. Where the console remembers, the one asked for, or chosen here (t, the palette), is
    kept for next time (``ui.data.settings``). Tests and screenshots leave the user's file alone."""

    def __init__(self, app: App[Any], asked: str | None, *, remember: bool) -> None:
        self._app = app
        self._remember = remember
        self.themes, self.problems = load_themes()  # the problems: notified once the app is mounted
        for t in self.themes.values():
            app.register_theme(t)
        theme = remembered_theme() if asked is None and remember else asked
        wanted = THEME_ALIASES.get(theme or "", theme) or DEFAULT_DARK
        known = wanted in app.available_themes
        initial = wanted if known else DEFAULT_DARK
        if asked and not known:
            self.problems.append(f"unknown theme {asked!r}; using {DEFAULT_DARK}")
        self._to_keep = initial if asked and known else None
        self._seen = initial
        app.theme = initial

    def watch(self) -> None:
        """Once the app is mounted: keep each theme chosen from now on, and the one asked for
        (--theme: the next console starts with it too)."""
        if not self._remember:
            return
        self._app.theme_changed_signal.subscribe(self._app, lambda theme: self._chosen(theme.name))
        if self._to_keep is not None:
            self._keep(self._to_keep)

    def _chosen(self, name: str) -> None:
        if name != self._seen:  # (the signal also tells of the theme the console started with)
            self._seen = name
            self._keep(name)

    def _keep(self, name: str) -> None:
        if not remember_theme(name):
            self._app.notify(
                f"could not keep the theme for next time in {settings_file()}", severity="warning", timeout=4
            )

    def after(self, current: str) -> str:
        """The loaded theme after ``current`` (t), in name order, round again at the end."""
        names = sorted(self.themes)
        at = names.index(current) if current in names else -1
        return names[(at + 1) % len(names)]
