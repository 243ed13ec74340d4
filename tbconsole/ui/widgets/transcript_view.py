"""A scrolling view of a transcript document (``tbconsole.ui.present.transcript_doc``) that draws only
what is on screen, with Textual's Line API.

Every piece has a height: exact once it has been drawn at the current width, estimated from its
characters until then (cheap: no wrapping). Only the pieces in view are wrapped into strips
(cached, least recently used first out), so opening a 200-turn transcript costs what one screen
of it costs, and scrolling costs only the pieces scrolled into view. When a drawn piece turns out
taller or shorter than estimated the layout below it moves; the view keeps the piece at its top
where it was (or the bottom, while following).

Following: the view keeps to the bottom as the document grows, until the user scrolls up;
back at the bottom (or ``follow()``), it follows again.
"""

from __future__ import annotations

from collections import OrderedDict

from rich.rule import Rule
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tbconsole.ui.present.piece_lines import PieceLines
from tbconsole.ui.present.transcript_doc import Piece, Section
from tbconsole.ui.widgets.base import Palette, palette_of

CACHE_LINES = 20_000  # strips kept for pieces drawn earlier
ROLES = ("primary", "accent", "success", "warning", "error", "fg", "muted")


def resolve(spec: str, palette: Palette) -> str:
    return " ".join(getattr(palette, word) if word in ROLES else word for word in spec.split())


def estimate(piece: Piece, width: int) -> int:
    """Lines a piece takes at ``width``, without wrapping it (a little low for word wrap)."""
    if piece.kind != "text":
        return 1
    body = "".join(text for text, _ in piece.spans)
    width = max(width, 1)
    return sum(max(1, -(-len(part) // width)) for part in body.split("\n"))


class TranscriptView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    TranscriptView { height: 1fr; padding: 0 1; background: $background; }
    """

    draw_everything = False  # wrap every piece as soon as it is shown (the bench's baseline)

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.sections: list[Section] = []
        self.follow = True
        self.pieces_drawn = 0  # pieces wrapped into strips since mounted (for tests and the bench)
        self.lines_rendered = 0  # lines handed to the screen since mounted (for the bench)
        self._pieces: list[Piece] = []
        self._owner: list[int] = []  # the section of each piece
        self._lines = PieceLines()  # each piece's height and first line
        self._exact: list[bool] = []
        self._known: dict[Piece, int] = {}  # exact heights at ``_width``
        self._guessed: dict[Piece, int] = {}  # estimated heights at ``_width``
        self._strips: OrderedDict[Piece, list[Strip]] = OrderedDict()
        self._cached_lines = 0
        self._width = 0
        self._palette: Palette | None = None
        self._styles: dict[str, Style] = {}
        self._jumping = False
        self._base = Style()  # the view's own style (background), under every strip

    # -- the document --------------------------------------------------------------------

    def set_sections(self, sections: list[Section]) -> None:
        """Show ``sections``; the pieces already drawn keep their strips."""
        anchor = self._top_anchor()
        self._check_base()
        self.sections = sections
        self._pieces, self._owner = [], []
        for s_index, section in enumerate(sections):
            self._pieces += section.pieces
            self._owner += [s_index] * len(section.pieces)
        self._measure()
        if self.draw_everything:
            self.draw_all()
        self._settle(anchor)

    def _measure(self) -> None:
        width = self._content_width()
        if width != self._width:
            self._width = width
            self._known.clear()
            self._guessed.clear()
            self._drop_strips()
        known, guessed = self._known, self._guessed
        heights = []
        for p in self._pieces:
            h = known.get(p) or guessed.get(p)
            if h is None:
                h = guessed[p] = estimate(p, width)
            heights.append(h)
        self._lines.reset(heights)
        self._exact = [p in known for p in self._pieces]
        self.virtual_size = Size(self._width, self._lines.total)

    @property
    def total_lines(self) -> int:
        return self._lines.total

    def _content_width(self) -> int:
        return max(10, self.scrollable_content_region.width or self.size.width or 80)

    def section_at(self, y: int) -> Section | None:
        if not self._pieces:
            return None
        return self.sections[self._owner[self._lines.at(y)]]

    def sections_from(self, y: int) -> list[Section]:
        """The sections from the one at line ``y`` down, in order."""
        if not self._pieces:
            return []
        return self.sections[self._owner[self._lines.at(y)] :]

    def nearest_turn(self, y: int) -> int | None:
        """The captured turn at line ``y`` or the first below it; else the last above it (the
        view opens at its bottom, the agent's log, below every turn). None: no turn at all."""
        below = next((s.turn for s in self.sections_from(y) if s.turn is not None), None)
        if below is not None:
            return below
        return next((s.turn for s in reversed(self.sections) if s.turn is not None), None)

    # -- scrolling and following ---------------------------------------------------------

    def _top_anchor(self) -> tuple[Piece, int] | None:
        if self.follow or not self._pieces:
            return None
        top = round(self.scroll_y)
        i = self._lines.at(top)
        return self._pieces[i], top - self._lines.starts[i]

    def _settle(self, anchor: tuple[Piece, int] | None) -> None:
        """Draw what is in view, then put the view back where it was (or at the bottom)."""
        if anchor is not None:
            piece, offset = anchor
            try:
                i = self._pieces.index(piece)
            except ValueError:
                i = -1
            if i >= 0:
                self._jump(self._lines.starts[i] + offset)
        for _ in range(8):  # drawn heights shift the layout; a few passes settle it
            if self.follow:
                self._jump(self.max_scroll_y)
            if not self._draw_visible():
                break
        self.refresh()

    def _jump(self, y: float) -> None:
        self._jumping = True
        try:
            self.scroll_target_y = y
            self.scroll_y = y
        finally:
            self._jumping = False

    def _draw_visible(self) -> bool:
        """Wrap the pieces in view that are not drawn yet; True when a height changed."""
        if not self._pieces:
            return False
        height = max(1, self.scrollable_content_region.height or self.size.height or 24)
        top = round(self.scroll_y)
        i = self._lines.at(top)
        changed = False
        while i < len(self._pieces) and self._lines.starts[i] < top + height:
            if not self._exact[i]:
                lines = len(self._draw(self._pieces[i]))
                self._exact[i] = True
                if lines != self._lines.heights[i]:
                    self._lines.set_height(i, lines)
                    changed = True
                    self.virtual_size = Size(self._width, self._lines.total)
            i += 1
        return changed

    def draw_all(self) -> None:
        """Wrap every piece now (what drawing everything up front would cost: for the bench)."""
        self._lines.reset([len(self._draw(piece)) for piece in self._pieces])
        self._exact = [True] * len(self._pieces)
        self.virtual_size = Size(self._width, self._lines.total)
        self._settle(None)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._jumping:
            return
        self.follow = new_value >= self.max_scroll_y  # scrolled up: stop following; back down: follow
        self._settle(None)

    def follow_bottom(self) -> None:
        self.follow = True
        self._settle(None)

    def to_top(self) -> None:
        self.follow = self.max_scroll_y == 0
        self._jump(0)
        self._settle(None)

    def on_resize(self) -> None:
        anchor = self._top_anchor()
        self._measure()
        self._settle(anchor)

    def restyle(self) -> None:
        """The theme changed: draw again with its colours."""
        self._check_base()
        self._palette = None
        self._styles.clear()
        self._drop_strips()
        self.refresh()

    # -- drawing -----------------------------------------------------------------------------

    def _style(self, spec: str) -> Style:
        palette = self._palette
        if palette is None:
            palette = self._palette = palette_of(self.app)
        style = self._styles.get(spec)
        if style is None:
            style = self._styles[spec] = Style.parse(resolve(spec, palette)) if spec else Style()
        return style

    def _drop_strips(self) -> None:
        self._strips.clear()
        self._cached_lines = 0

    def _draw(self, piece: Piece) -> list[Strip]:
        """The strips of a piece at the current width, in the view's style (cached)."""
        strips = self._strips.get(piece)
        if strips is not None:
            self._strips.move_to_end(piece)
            return strips
        width = self._width
        console = self.app.console
        options = console.options.update(width=width, height=None, min_width=width, max_width=width)
        if piece.kind == "gap":
            strips = [Strip.blank(width, self._base)]
        else:
            title = Text(no_wrap=piece.kind == "rule", overflow="fold")
            for text, spec in piece.spans:
                title.append(text, style=self._style(spec))
            renderable = Rule(title, style=self._style("muted"), align="left") if piece.kind == "rule" else title
            lines = Segment.split_and_crop_lines(
                console.render(renderable, options), width, pad=True, include_new_lines=False
            )
            base = self._base
            strips = [Strip(line, width).apply_style(base) for line in lines] or [Strip.blank(width, base)]
        self.pieces_drawn += 1
        self._strips[piece] = strips
        self._cached_lines += len(strips)
        self._known[piece] = len(strips)
        while self._cached_lines > CACHE_LINES and len(self._strips) > 1:
            _, old = self._strips.popitem(last=False)
            self._cached_lines -= len(old)
        return strips

    def _check_base(self) -> None:
        """The view's style (background) lies under every strip: strips drawn in another go."""
        base = self.rich_style  # once a frame, not once a line: it is not cheap
        if base != self._base:
            self._base = base
            self._drop_strips()

    def render_lines(self, crop: Region) -> list[Strip]:
        self._check_base()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        self.lines_rendered += 1
        line = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if not self._pieces or line >= self._lines.total:
            return Strip.blank(width, self._base)
        i = self._lines.at(line)
        strips = self._draw(self._pieces[i])
        offset = line - self._lines.starts[i]
        if offset >= len(strips):
            return Strip.blank(width, self._base)
        strip = strips[offset]
        return strip if strip.cell_length == width else strip.crop_extend(0, width, self._base)
