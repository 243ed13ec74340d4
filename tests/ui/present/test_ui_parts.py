"""The console's pure presentation parts: plot binning/scaling, plain-text sanitising, the token
decoder, and a meaning for every metric and counter."""

import pytest
from rich.console import Console

from tbconsole.synthetic.run import HOSTILE
from tbconsole.ui.data.tokenizer import load_decoder
from tbconsole.ui.present import plotmath
from tbconsole.ui.present.sanitize import one_line, plain, text
from tbconsole.ui.present.token_text import TokenDecoder

from tests_support.prereqs import missing

# -- plots ----------------------------------------------------------------------------------


def test_resample_keeps_short_series_and_buckets_long_ones():
    assert plotmath.resample([1, 2, 3], 5) == [1, 2, 3]
    assert plotmath.resample(list(range(10)), 5) == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert plotmath.resample([1, 2], 0) == []


def test_scale_and_sparkline():
    assert plotmath.scale([0, 5, 10], 9) == [0, 4, 8]
    assert plotmath.scale([3, 3, 3], 8) == [4, 4, 4]  # flat: the middle
    assert plotmath.scale([0, 0], 8) == [0, 0]
    assert plotmath.scale([-5, 20], 8, lo=0, hi=10) == [0, 7]  # clipped
    line = plotmath.sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8)
    assert line == "▁▂▃▄▅▆▇█"
    assert len(plotmath.sparkline(list(range(1000)), 20)) == 20
    assert plotmath.sparkline([None, float("nan"), 1.0], 5) == plotmath.sparkline([1.0], 5)
    assert plotmath.sparkline([], 10) == ""


def test_histogram_and_bars():
    counts, edges = plotmath.histogram([0, 0.1, 0.5, 0.99, 1.0, 2.0, -1], 4, 0.0, 1.0)
    assert counts == [3, 0, 1, 3] and len(edges) == 5 and edges[0] == 0.0 and edges[-1] == 1.0
    assert sum(plotmath.histogram([1, 2, 3], 3)[0]) == 3
    assert plotmath.bar(10, 10, 4) == "████"
    assert plotmath.bar(5, 10, 4) == "██"
    assert plotmath.bar(1, 16, 2) == "▏"
    assert plotmath.bar(0, 10, 4) == "" and plotmath.bar(3, 0, 4) == ""


def test_reward_bins_binary_and_continuous():
    counts, labels = plotmath.reward_bins([0, 1, 1, 1, None])
    assert counts == [1, 3] and labels == ["0", "1"]
    counts, labels = plotmath.reward_bins([i / 20 for i in range(21)])
    assert len(counts) == 10 and sum(counts) == 21


# -- plain text -------------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", HOSTILE + ["\x9b31m C1 CSI", "\x00nul \x7fdel", "[/]", "[red]x"])
def test_hostile_strings_render_inert(hostile):
    shown = plain(hostile)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown and "\u202e" not in shown
    console = Console(width=200, record=True, force_terminal=True, color_system="truecolor")
    console.print(text(hostile))
    out = console.export_text()
    # every visible character of the input is still there, literally (markup not parsed)
    if "[bold red]" in hostile:
        assert "[bold red]not bold[/bold red]" in out
    if "\x1b[31m" in hostile:
        assert "␛[31mred?" in out
    if "]0;pwned" in hostile:
        assert "␛]0;pwned title␇" in out
    raw = console.export_text(styles=True)
    assert "\x1b]" not in raw and "\x1b[2J" not in raw and "\x07" not in raw


def test_a_programs_terminal_output_loses_its_codes_and_a_models_text_keeps_them_visible():
    from tbconsole.ui.present.transcript_doc import agent_log_section, texts
    from tbconsole.ui.present.trial_outputs import TrialFiles

    litellm = "\x1b[1;31mProvider List: https://docs.litellm.ai/docs/providers\x1b[0m\n\x1b]0;title\x07done \x1b lone"
    section = agent_log_section(TrialFiles(trial_dir=None, agent_logs=[("mini-swe-agent.txt", litellm)]))
    assert section is not None
    shown = "".join(span for piece in section.pieces for span, _ in piece.spans)
    assert "Provider List: https://docs.litellm.ai/docs/providers" in shown and "[1;31m" not in shown
    assert "title" not in shown and "done ␛ lone" in shown  # a lone ESC is no sequence: shown inert
    model = "".join(span for piece in texts("\x1b[31mred\x1b[0m") for span, _ in piece.spans)
    assert model == "␛[31mred␛[0m"


def test_one_line():
    assert one_line("a\nb\tc", 100) == "a ⏎ b c"
    assert one_line("x" * 500, 10) == "x" * 10 + "…"


def test_token_decoder_decodes_one_token_at_a_time():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    decoder = TokenDecoder(Tokenizer(WordLevel({"hello": 0, "world": 1, "[UNK]": 2}, unk_token="[UNK]")))
    assert decoder.available
    assert [decoder.piece(i) for i in (1, 0, 1)] == ["world", "hello", "world"]


def test_token_decoder_uses_a_tokenizer_when_there_is_one():
    decoder = load_decoder("no-such/model")
    if not decoder.available:
        missing("no tokenizer.json found (engine assets missing)", "Reinstall: make setup.")
    text = "hello world, again"
    ids = decoder._tok.encode(text, add_special_tokens=False).ids
    assert len(ids) > 1 and "".join(decoder.piece(i) for i in ids) == text


# -- help texts ---------------------------------------------------------------------------------


def test_every_metric_and_counter_is_explained():
    from tbconsole.ui.present.wording import CAPTURE_HELP, GATEWAY_HELP, HELP_TABLES, METRIC_ROWS
    from tbconsole.ui.widgets.captures import NUMS

    assert len({row.label for row in METRIC_ROWS}) == len(METRIC_ROWS)
    for row in METRIC_ROWS:
        assert len(row.help) > 30, row.label
        assert any(key in row.help for key in row.keys), row  # names the metric it shows
    assert set(NUMS) <= set(CAPTURE_HELP)
    assert {"status", "probes", "sampler"} <= set(GATEWAY_HELP)
    listed = {name for _, rows in HELP_TABLES for name, _ in rows}
    assert {row.label for row in METRIC_ROWS} | set(CAPTURE_HELP) | set(GATEWAY_HELP) <= listed
