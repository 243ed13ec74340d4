"""Find across trials (`f`): what is searched, the regex and its errors, the bound on results, over
a real demo run folder (the session's `demo_run`) and a recorded one (fixtures/group-run) for the
snapshots, in both themes."""

import dataclasses

import orjson
import pytest
from textual.widgets import Input

from tbconsole.record.capturefile import CaptureRecord, MessageText, ReplyText, ToolCallText
from tbconsole.record.events import GroupStarted, read_events
from tbconsole.record.runfolder import RunFolder, trial_id
from tbconsole.synthetic.run import record_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.captures import captured_refs, captured_steps, search_run
from tbconsole.ui.data.source import Replay
from tbconsole.ui.present.transcript_search import (
    SearchResult,
    TrialRef,
    compile_query,
    search_records,
    snippet,
    trials_to_search,
)
from tbconsole.ui.screens.find import FindScreen
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.transcript import TranscriptScreen

from tests_support.prereqs import missing
from tests_support.ui import GROUP_RUN, T_FIXED, run_events, settle, wait_for

pytestmark = pytest.mark.timeout(180)

REF = TrialRef("task.s0g0t0", 0, 0, 0, "task")


def turn(n, messages=(), text="", reasoning=None, calls=(), restarted=False):
    return CaptureRecord(
        turn=n,
        prompt_len=1,
        output=(),
        logprobs=(),
        messages=tuple(MessageText(role, content) for role, content in messages),
        restarted=restarted,
        reply=ReplyText(text=text, reasoning=reasoning, tool_calls=tuple(ToolCallText(n, a) for n, a in calls)),
    )


def find(records, query, regex=False, limit=100):
    pattern = compile_query(query, regex)
    result = SearchResult(query=query)
    search_records(pattern, REF, records, result, limit)
    return result


def test_replies_reasoning_tool_calls_and_tool_output_are_searched_but_not_the_prompt():
    records = [
        turn(0, [("system", "You are needle-free"), ("user", "find the needle")], text="needle? ls", calls=()),
        turn(1, [("tool", "a needle in the output")], reasoning="think: needle", calls=[("bash", '{"c": "needle"}')]),
        turn(2, [("user", "Observation: NEEDLE")], text="done"),
    ]
    found = [(m.turn, m.where) for m in find(records, "needle").matches]
    assert found == [(0, "reply"), (1, "tool output"), (1, "reasoning"), (1, "tool call"), (2, "user")]
    # A rewritten history repeats the conversation: only what follows the last reply is new.
    again = turn(3, [("user", "find the needle"), ("assistant", "needle"), ("tool", "x")], restarted=True)
    assert find([again], "needle").matches == []


def test_a_text_is_listed_once_with_its_first_match_and_how_many_more():
    result = find([turn(0, text="ab ab ab")], "ab")
    (m,) = result.matches
    assert (m.snippet[m.start : m.end], m.more) == ("ab", 2)


def test_regex_and_its_errors():
    records = [turn(0, text="exit code 127"), turn(1, text="exit code 0")]
    assert [m.turn for m in find(records, r"code \d{3}", regex=True).matches] == [0]
    assert find(records, r"code \d{3}").matches == []  # as text, the same query is literal
    assert "not a valid regular expression" in compile_query("(unclosed", True)
    assert find(records, "a*", regex=True).matches == []  # empty matches list nothing


def test_the_search_stops_at_its_limit_and_says_so():
    records = [turn(i, text=f"line {i} of output") for i in range(50)]
    result = find(records, "output", limit=7)
    assert len(result.matches) == 7 and result.truncated
    assert "stopped after 7" in result.summary


def test_a_snippet_keeps_the_match_on_one_line():
    text = "first line\n" + "x" * 100 + "NEEDLE\tand after" + "y" * 100
    line, start, end = snippet(text, text.index("NEEDLE"), text.index("NEEDLE") + 6)
    assert line[start:end] == "NEEDLE" and "\n" not in line and "\t" not in line
    assert line.startswith("…") and line.endswith("…")


# -- over a real demo run ------------------------------------------------------------------------


def first_command_word(folder, state):
    """A word the run's own captures hold: the first word of a tool call of the current step."""
    for t in state.trials.values():
        if t.step != state.step:
            continue
        for line in folder.capture_file(t.step, t.group, t.trial).read_bytes().splitlines():
            for call in (orjson.loads(line).get("reply") or {}).get("tool_calls") or []:
                words = [w for w in call["arguments"].replace('"', " ").split() if w.isalpha() and len(w) > 2]
                if words:
                    return words[1] if len(words) > 1 else words[0]
    missing(
        "no tool call in this recorded run's current step", "Record the demo run again (tests/ui/make_fixtures.py)."
    )


@pytest.mark.e2e
@pytest.mark.root
async def test_find_across_a_real_runs_trials_and_open_one(demo_run):
    folder = RunFolder(demo_run)
    app = ConsoleApp(replay=Replay(list(read_events(folder.events))), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        word = first_command_word(folder, app.state)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        screen = app.screen
        await pilot.press(*word, "enter")
        await wait_for(pilot, lambda: screen.result is not None and not screen.searching)
        result = screen.result
        assert result.matches and result.error is None
        assert result.trials == len([t for t in app.state.trials.values() if t.step == app.state.step])
        for m in result.matches:  # each one is there, in that trial's capture file at that turn
            assert m.trial.step == app.state.step
            assert word.lower() in m.snippet.lower()
            assert m.snippet[m.start : m.end].lower() == word.lower()
            lines = folder.capture_file(m.trial.step, m.trial.group, m.trial.trial).read_bytes().splitlines()
            assert any(orjson.loads(x)["turn"] == m.turn and word.lower() in x.decode().lower() for x in lines)
        # Every step kept: the memory's trials, and the older steps' from their capture files.
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: screen.result is not result and not screen.searching)
        older = set(captured_steps(demo_run)) - {t.step for t in app.state.trials.values()}
        assert screen.result.trials == len(app.state.trials) + len(captured_refs(demo_run, older)) >= result.trials
        # Enter on a result opens that trial's transcript.
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        assert app.screen.trial == screen.selected_match().trial.trial
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        # An invalid regular expression: a clear message, no crash, the screen stays.
        await pilot.press("ctrl+r")
        box = screen.query_one("#fquery", Input)
        box.focus()
        box.value = "(unclosed"
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.result is not None and screen.result.error is not None)
        assert "not a valid regular expression" in screen.result.error
        assert screen.results.option_count == 0
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))


@pytest.mark.e2e
@pytest.mark.root
def test_a_search_over_a_real_run_is_bounded(demo_run):
    folder = RunFolder(demo_run)
    state = Replay(list(read_events(folder.events))).seek(10**9)
    refs = trials_to_search(state, all_steps=True)
    everything = search_run(demo_run, refs, ".", regex=True)
    assert len(everything.matches) > 3
    bounded = search_run(demo_run, refs, ".", regex=True, limit=3)
    assert len(bounded.matches) == 3 and bounded.truncated
    assert bounded.matches == everything.matches[:3]
    asked: list[int] = []
    stopped = search_run(demo_run, refs, ".", regex=True, stop=lambda: asked.append(1) or len(asked) > 2)
    assert stopped.trials == 2 and len(asked) == 3  # a search a newer one replaced reads no further
    assert stopped.matches == everything.matches[: len(stopped.matches)]


def runners_ids(folder, events):
    """A recorded synthetic run with the runner's trial ids (``task.s0g0t1``: the id says where its
    captures are, as in a real run), its capture files renamed to match."""
    names = {}
    for e in events:
        if isinstance(e, GroupStarted):
            for k, old in enumerate(e.trials):
                names[old] = trial_id(e.task, e.step, e.group, k)
                old_file = RunFolder(folder).capture_file(e.step, e.group, old)
                old_file.rename(old_file.with_name(f"{names[old]}.jsonl"))

    def renamed(e):
        changes = {}
        if isinstance(getattr(e, "trial", None), str):
            changes["trial"] = names.get(e.trial, e.trial)
        if isinstance(getattr(e, "trials", None), list):
            changes["trials"] = [names.get(t, t) for t in e.trials]
        return dataclasses.replace(e, **changes) if changes else e

    return [renamed(e) for e in events]


@pytest.mark.e2e
async def test_all_kept_steps_are_every_step_the_run_folder_keeps(tmp_path):
    """Five steps recorded: the memory holds the last three (KEEP_STEPS), the run folder all five.
    ctrl+t searches them all, says which, and a match in step 0 opens with its turns."""
    folder = tmp_path / "run"
    events = runners_ids(folder, record_run(folder, steps=5, groups=1, group_size=2, hostile=False, turns=(2, 3)))
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot)
        assert sorted({t.step for t in app.state.trials.values()}) == [2, 3, 4]  # what memory keeps
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        screen = app.screen
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "all kept steps (0–4)" in screen.query_one("#fhead").content.plain)
        await pilot.press(".", "enter")  # a regex? no: text "." matches every sentence's end
        await wait_for(pilot, lambda: screen.result is not None and not screen.searching)
        assert screen.result.trials == 10  # 5 steps × 2 trials, from the capture files
        assert sorted({m.trial.step for m in screen.result.matches}) == [0, 1, 2, 3, 4]
        first = screen.result.matches[0]
        assert first.trial.step == 0 and first.trial.trial in {e.trial for e in events if hasattr(e, "trial")}
        await pilot.press("enter")  # the list has the focus after a search
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        await wait_for(pilot, lambda: "turn0" in app.screen.blocks)  # read from its capture file
        assert app.screen.trial == first.trial.trial
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("escape")
        # A replay moved back to step 1 searches up to it, not ahead.
        app.replay_seek(next(m for m in app.replay.marks if app.replay.seek(m).step == 1))
        await settle(pilot)
        assert app.state.step == 1
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen) and app.screen is not screen)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "all kept steps (0–1)" in app.screen.query_one("#fhead").content.plain)


# -- snapshots ------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("theme", ["dark", "light"])
def test_find_screen(snap_compare, theme):
    """`sort` in step 1 of a recorded demo run: each trial's tool call."""

    async def search(pilot):
        await settle(pilot)
        await pilot.press("f")
        await settle(pilot)
        await pilot.press(*"sort", "enter")
        await pilot.app.workers.wait_for_complete()
        await settle(pilot)

    app = ConsoleApp(replay=Replay(run_events(GROUP_RUN)), mode="replay", theme=theme, clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=(120, 30), run_before=search)
