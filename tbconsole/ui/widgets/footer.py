"""Textual's footer, made cheap to keep: it is rebuilt only when the keys it shows change.

Textual's ``Footer`` recomposes on every change of focus or screen, and each new key restyles
itself twice while it mounts (its ``compact`` starts True, then is bound to False): on a busy
machine that is tens of milliseconds per key press, for a footer that usually looks the same.

It shows the keys of the screen in focus (the grid's enter, g, f, w, v on the main screen) as well
as the run's. Below ``WIDE`` columns the labels are one short word, and below ``NARROW`` the keys
that ``?`` lists first and that are seldom pressed make room (/, a, l, ^p): a key that scrolls out of
an 80-column footer is a key nobody finds.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

WIDE = 130  # columns from which every key has its whole label
NARROW = 100  # columns below which the seldom-pressed keys stay in `?` only
SHORT = {  # an action's label below WIDE columns
    "pause": "Pause",
    "leave": "Leave",
    "quit_console": "Quit",
    "select_cursor": "Trial",
    "advisories": "Advice",
    "timeline": "Time",
    "clear_filter": "Clear",
    "cancel_trial": "Cancel",
    "harbor_view": "Harbor",
    "rank(1)": "Least likely",
}
SELDOM = {"filter", "abort", "log"}  # left out below NARROW columns


# A screen with many keys (the token view's, beside the run's) can want more room than the
# width's labels give: then the short labels, and then keys leave, least needed first: the seldom
# ones, then the screen's own from the right; never the run's controls, back, help or quit (all
# are in `?` and the palette).
KEPT = {"quit_console", "leave", "help", "back", "pause", "resume", "stop", "decide"}


def footer_width_class(width: int) -> str:
    return "wide" if width >= WIDE else "short" if width >= NARROW else "narrow"


def key_width(key: FooterKey) -> int:
    """The cells a (not compact) footer key takes: its key and its label, padded."""
    return cell_len(key.key_display) + 2 + (cell_len(key.description) + 1 if key.description else 0)


def keys_to_drop(keys: list[FooterKey], room: int, *, narrow: bool) -> list[FooterKey]:
    """The keys left out of a footer ``room`` cells wide: below NARROW the seldom ones; then, while
    the rest does not fit, the short labels, then keys as ``KEPT`` says."""
    dropped = [k for k in keys if narrow and k.action in SELDOM]
    shown = [k for k in keys if k not in dropped]
    if sum(map(key_width, shown)) <= room:
        return dropped
    for k in shown:
        k.description = SHORT.get(k.action, k.description)
    order = [k for k in shown if k.action in SELDOM] + [k for k in reversed(shown) if k.action not in KEPT | SELDOM]
    for k in order:
        if sum(map(key_width, shown)) <= room:
            break
        shown.remove(k)
        dropped.append(k)
    return dropped


class KeyFooter(Footer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._composed: tuple | None = None  # the keys on show, as the screen's bindings gave them
        self._rebuilding = False
        self._width_class = ""

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
        self._width_class = footer_width_class(self.app.size.width)
        # ^p is in `?` too; below NARROW columns its room goes to the run's keys (q above all).
        self.set_reactive(Footer.show_command_palette, self._width_class != "narrow")
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey) and not w.has_class("-command-palette")]
        palette = sum(key_width(w) + 2 for w in widgets if isinstance(w, FooterKey) and w.has_class("-command-palette"))
        for key in keys:
            if self._width_class != "wide":
                key.description = SHORT.get(key.action, key.description)
            key.set_reactive(FooterKey.compact, self.compact)
        dropped = set(keys_to_drop(keys, self.app.size.width - palette, narrow=self._width_class == "narrow"))
        yield from (widget for widget in widgets if widget not in dropped)
        if self._bindings_ready:
            self.styles.grid_size_columns = len(keys) - len(dropped)

    def on_resize(self) -> None:
        if self._width_class and footer_width_class(self.app.size.width) != self._width_class and not self._rebuilding:
            self._rebuilding = True
            self.call_after_refresh(self.recompose)

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
