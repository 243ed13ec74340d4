"""The console's pure parts: plot binning/scaling, plain-text sanitising, theme files, trial
files (ATIF, verifier output, result.json, capture files), the import boundary."""

import json
import subprocess
import sys

import pytest
from rich.console import Console

from tbconsole.record.events import GroupEnded
from tbconsole.synthetic.run import HOSTILE
from tbconsole.ui.data.captures import capture_path, read_capture_outputs
from tbconsole.ui.data.tokenizer import load_decoder
from tbconsole.ui.data.trialfiles import load_trial_files, parse_atif
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


# -- themes -----------------------------------------------------------------------------------


def test_theme_files_load(tmp_path):
    from tbconsole.ui.themes import DEFAULT_DARK, DEFAULT_LIGHT, REPO_THEMES, load_themes

    assert (REPO_THEMES / "tbconsole-dark.toml").is_file() and (REPO_THEMES / "tbconsole-light.toml").is_file()
    themes, problems = load_themes([REPO_THEMES])
    assert problems == []
    assert themes[DEFAULT_DARK].dark and not themes[DEFAULT_LIGHT].dark
    assert themes[DEFAULT_DARK].variables["plot-line"]
    (tmp_path / "mine.toml").write_text('name = "mine"\nprimary = "#ff0000"\ndark = false\n')
    (tmp_path / "broken.toml").write_text('name = "broken"\n')  # no primary
    (tmp_path / "garbage.toml").write_text("not = [toml")
    themes, problems = load_themes([REPO_THEMES, tmp_path])
    assert themes["mine"].primary == "#ff0000"
    assert len(problems) == 2 and "broken" not in themes


# -- trial files ------------------------------------------------------------------------------

ATIF = {
    "schema_version": "ATIF-v1.6",
    "session_id": "s",
    "agent": {"name": "mini-swe-agent", "version": "2"},
    "steps": [
        {"step_id": 1, "source": "system", "message": "You are a helpful agent."},
        {"step_id": 2, "source": "user", "message": "Create /app/hello.txt [bold]now[/bold]"},
        {
            "step_id": 3,
            "source": "agent",
            "message": [{"type": "text", "text": "ok \x1b[2J"}],
            "reasoning_content": "think",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "echo hi > /app/hello.txt"}}
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "done\x07"}]},
            "metrics": {"prompt_tokens": 100, "completion_tokens": 20},
        },
    ],
}


def make_trial_dir(tmp_path, *, trajectory=ATIF, task_instruction="Write hello.", complete=True):
    trial = tmp_path / "hello-file__abc"
    (trial / "agent").mkdir(parents=True)
    (trial / "verifier").mkdir()
    task = tmp_path / "task"
    task.mkdir()
    (task / "instruction.md").write_text(task_instruction)
    body = json.dumps(trajectory)
    (trial / "agent" / "trajectory.json").write_text(body if complete else body[:40])
    (trial / "verifier" / "test-stdout.txt").write_text("1 passed\n")
    (trial / "result.json").write_text(
        json.dumps(
            {
                "task_name": "hello-file",
                "trial_name": trial.name,
                "config": {"task": {"path": str(task)}},
                "verifier_result": {"rewards": {"reward": 1.0}},
                "exception_info": None,
            }
        )
    )
    return trial


def test_trial_files(tmp_path):
    trial = make_trial_dir(tmp_path)
    files = load_trial_files(trial)
    assert files.instruction == "Write hello."
    assert [s.source for s in files.steps] == ["system", "user", "agent"]
    agent = files.steps[2]
    assert agent.message == "ok \x1b[2J" and agent.reasoning == "think"
    assert agent.tool_calls == [("bash", '{"command": "echo hi > /app/hello.txt"}')]
    assert agent.observations == ["done\x07"] and agent.completion_tokens == 20
    assert files.verifier_stdout == "1 passed\n" and files.rewards == {"reward": 1.0}
    assert files.exception is None and files.problems == []
    assert load_trial_files(None).steps == [] and load_trial_files(tmp_path / "missing").steps == []


def test_trial_files_being_written(tmp_path):
    trial = make_trial_dir(tmp_path, complete=False)
    files = load_trial_files(trial)
    assert files.steps == [] and files.problems
    assert parse_atif({"steps": [{"source": "agent"}, "junk"]})[0].message == ""


def test_capture_outputs(tmp_path):
    path = capture_path(tmp_path, 3, 1, "t1")
    assert path == tmp_path / "capture" / "step_000003" / "group_001" / "t1.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        json.dumps(
            {
                "v": 1,
                "trial": "t1",
                "turn": i,
                "prompt_len": 3,
                "prompt_shared": 0,
                "prompt_tail": [1, 2, 3],
                "output": [10 + i, 11],
                "logprobs": [-0.1, -2.0],
                "stop_reason": "stop",
            }
        )
        for i in range(2)
    ]
    path.write_text("\n".join(lines) + "\n" + lines[0][:20])  # a cut-short last line
    turns = read_capture_outputs(path)
    assert [t.turn for t in turns] == [0, 1] and turns[1].output == [11, 11] and turns[0].logprobs == [-0.1, -2.0]
    assert read_capture_outputs(None) == [] and read_capture_outputs(tmp_path / "nope") == []
    assert TokenDecoder(None).piece(42) == "⟨42⟩"


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


# -- the trials grid's rows ------------------------------------------------------------------------


def test_trials_grid_rows_are_fixed_width_and_mark_the_cursor():
    from rich.text import Text

    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.trialcells import column_at, fit, grid_widths, header_text, row_text

    p = Palette(*(["#010101"] * 9))
    assert fit(Text("abcdefgh"), 4).plain == "abcd"
    assert fit(Text("ab", style="bold"), 4).plain == "ab  " and fit(Text("ab"), 4).cell_len == 4
    assert fit(Text("a task name", overflow="ellipsis"), 6).plain == "a tas…"
    label, cells = Text("1 task"), [Text("✓1 3s"), None, Text("agent 2t")]
    line = row_text(label, cells, 8, 6)
    assert line.plain == " " + "1 task  " + " " + " ✓1 3s  " + " " * 8 + " agent  "
    assert line.cell_len == (8 + 2) + 3 * (6 + 2)
    marked = row_text(label, cells, 8, 6, cursor=3, cursor_style="reverse")
    assert marked.plain == line.plain
    assert [(s.start, s.end) for s in marked.spans if str(s.style) == "reverse"] == [(26, 34)]
    head = header_text(3, 8, 6, p)
    assert head.plain.split() == ["group", "1", "2", "3"] and head.cell_len == line.cell_len
    assert [column_at(x, 8, 6, 3) for x in (0, 9, 10, 17, 18, 33, 34)] == [0, 0, 1, 1, 2, 3, None]
    assert grid_widths(120, 4) == (24, 16) and grid_widths(80, 4) == (14, 13) and grid_widths(80, 20)[1] == 5


def test_group_flags_are_shown_whole_in_a_narrow_label(finished_events):
    """The label cuts the task name, never the ``✓all`` / ``✗err`` flag (it was cut to ``=a…``)."""
    from tbconsole.state import reduce_all
    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.trialcells import fit, group_label

    p = Palette(*(["#010101"] * 9))
    state = reduce_all(finished_events)
    same = next(g for g in state.groups.values() if g.all_same(state.trials))
    for width in (10, 14, 24):
        label = fit(group_label(same, state, width, p), width).plain.rstrip()
        assert label.endswith(" ✓all") and len(label) <= width, label  # hello-file: all solved
    state = reduce_all(
        finished_events[: next(i for i, e in enumerate(finished_events) if isinstance(e, GroupEnded) and not e.ok) + 1]
    )
    failed = next(g for g in state.groups.values() if g.ok is False)
    assert fit(group_label(failed, state, 14, p), 14).plain.rstrip().endswith(" ✗err")


def test_cancelled_and_limit_cells():
    from tbconsole.state import TrialState
    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.trialcells import cell_text

    p = Palette(*(["#010101"] * 9))
    cancelled = TrialState(
        trial="t", step=0, group=0, index=0, task="a", phase="agent", started=0.0, cancelled=True, ended=5.0
    )
    assert cell_text(cancelled, 100, 12, p).plain == "cancel"
    for outcome, mark in (
        ("TimeLimitExceeded", "T"),
        ("SequenceLengthLimitExceeded", "L"),
        ("OutputTokenLimitExceeded", "L"),
        ("Submitted", ""),
    ):
        t = TrialState(
            trial="t",
            step=0,
            group=0,
            index=0,
            task="a",
            outcome=outcome,
            scored=True,
            reward=1.0,
            started=0.0,
            ended=3.0,
        )
        assert cell_text(t, 100, 12, p).plain == f"✓1{mark} 3s"
    failed = TrialState(
        trial="t", step=0, group=0, index=0, task="a", outcome="AgentError", scored=False, exception_type="CaptureLost"
    )
    assert cell_text(failed, 100, 16, p).plain == "! CaptureLost"
    assert cell_text(failed, 100, 12, p).plain == "! CaptureLo…"  # cut to the cell, not past it


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


# -- boundaries ---------------------------------------------------------------------------------


def test_plain_parts_of_the_ui_do_not_import_textual():
    modules = [
        "tbconsole.state",
        "tbconsole.synthetic.run",
        "tbconsole.ui.present.plotmath",
        "tbconsole.ui.present.sanitize",
        "tbconsole.ui.data.source",
        "tbconsole.ui.data.trialfiles",
        "tbconsole.ui.data.captures",
        "tbconsole.ui.data.timeline",
        "tbconsole.ui.data.tokenizer",
        "tbconsole.ui.present.wording",
        "tbconsole.ui.present.filters",
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'torch', 'harbor', 'tinker')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_attach_path_imports_no_heavy_modules(tmp_path):
    """`tbconsole attach` loads the app without torch, harbor, tinker, transformers, aiohttp."""
    code = (
        "import sys\n"
        "from tbconsole.entry import attach\n"
        "from tbconsole.ui.app import ConsoleApp\n"
        "from tbconsole.ui.data.source import TailSource, Replay, FileControls\n"
        "heavy = ('torch', 'harbor', 'tinker', 'tinker_cookbook', 'transformers', 'aiohttp', 'litellm', 'numpy')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
