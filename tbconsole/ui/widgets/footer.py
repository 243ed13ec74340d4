"""Textual's footer, made cheap to keep: it is rebuilt only when the keys it shows change.

Textual's ``Footer`` recomposes on every change of focus or screen, and each new key restyles
itself twice while it mounts (its ``compact`` starts True, then is bound to False): on a busy
machine that is tens of milliseconds per key press, for a footer that usually looks the same.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeyFooter(Footer):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._composed: tuple | None = None  # the keys on show, as the screen's bindings gave them
        self._rebuilding = False

    def _keys(self) -> tuple:
        """What ``Footer.compose`` reads from the screen's bindings."""
        palette = self.app.COMMAND_PALETTE_BINDING if self.show_command_palette else None
        return tuple(
            (key, binding, enabled, tooltip)
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette
        )

    def compose(self) -> ComposeResult:
        self._rebuilding = False
        self._composed = self._keys() if self._bindings_ready else None
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):  # the bound ones
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    def bindings_changed(self, screen: Screen) -> None:
        # Unlike Textual's, also while the app has no focus (a browser tab, a terminal window in
        # the background): the keys follow the run (pause, then resume). None of this console's
        # shown keys belongs to a focused widget, so losing focus changes none of them.
        self._bindings_ready = True
        if self._rebuilding or not self.is_attached or screen is not self.screen:
            return
        if self._keys() != self._composed:
            self._rebuilding = True
            self.call_after_refresh(self.recompose)
