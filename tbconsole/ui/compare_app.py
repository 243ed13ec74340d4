"""The app of ``tbconsole compare``: 2–4 runs read (off the UI thread), compared and drawn by
``CompareScreen``; while any of them is live it reads on every ``refresh_s`` seconds (only what
each events.jsonl gained) and draws the comparison again. Finished runs are read once.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import App

from tbconsole.runs.compare import Comparison, RunReading, build
from tbconsole.ui.screens.compare import CompareScreen
from tbconsole.ui.themes import DEFAULT_DARK, DEFAULT_LIGHT, load_themes

THEME_ALIASES = {"dark": DEFAULT_DARK, "light": DEFAULT_LIGHT}


class CompareApp(App[int]):
    TITLE = "tbconsole compare"
    CSS = """
    Screen { background: $background; }
    """

    def __init__(self, readings: Sequence[RunReading], theme: str | None = None, refresh_s: float = 1.0) -> None:
        super().__init__()
        self.readings = list(readings)
        self.refresh_s = refresh_s
        self.comparison: Comparison | None = None
        self.reads = 0  # comparisons drawn: the first, then one per read of a live run
        self._reading = False
        self.error: str | None = None  # why the runs could not be read
        self.themes, self._theme_problems = load_themes()
        for t in self.themes.values():
            self.register_theme(t)
        wanted = THEME_ALIASES.get(theme or "", theme) or DEFAULT_DARK
        self.theme = wanted if wanted in self.available_themes else DEFAULT_DARK
        if theme and wanted not in self.available_themes:
            self._theme_problems.append(f"unknown theme {theme!r}; using {DEFAULT_DARK}")

    def on_mount(self) -> None:
        self.push_screen(CompareScreen())
        for problem in self._theme_problems:
            self.notify(problem, severity="warning")
        self.theme_changed_signal.subscribe(self, lambda _theme: self._draw())
        self._read()
        self.set_interval(self.refresh_s, self._follow, name="follow")

    def _follow(self) -> None:
        """Read on while a run is live (the first read still under way counts as live)."""
        if not self._reading and self.comparison is not None and self.comparison.live:
            self._read()

    def _read(self) -> None:
        self._reading = True
        self.run_worker(self._read_runs, thread=True, name="read-runs", exit_on_error=False)

    def _read_runs(self) -> None:
        try:
            for reading in self.readings:
                reading.read()
            comparison = build(self.readings)
        except OSError as exc:
            self.call_from_thread(self._failed, f"cannot read a run: {exc}")
            return
        self.call_from_thread(self._show, comparison)

    def _failed(self, message: str) -> None:
        self._reading = False
        self.error = message
        self.notify(message, severity="error", timeout=30)

    def _show(self, comparison: Comparison) -> None:
        self._reading = False
        self.comparison = comparison
        self.reads += 1
        self._draw()

    def _draw(self) -> None:
        screen = self.screen
        if self.comparison is not None and isinstance(screen, CompareScreen):
            live = f"live: read again every {self.refresh_s:g}s" if self.comparison.live else "none is live"
            screen.show(self.comparison, live)

    def action_next_theme(self) -> None:
        names = sorted(self.themes)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]

    def on_unmount(self) -> None:
        for reading in self.readings:
            reading.close()
