"""Paths and ids stay as the runner wrote them; only what is drawn is made inert.

A task named with an escape sequence (ESC ] 0; … BEL: a window title), a bidi override and Rich
markup (a style, a click action) makes a trial folder, a trial id and a capture file of that very name. The console must
find them all by that name (the transcript's instruction, exception, agent log and captured
turn; find across trials; the Harbor-view command) and send it back in commands (the ledger's
drop, weight, re-admit), while everything it draws shows the name inertly. A small run folder,
made by hand with real files, is attached to as a run folder is.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from tbconsole.common.inert import CONTROL, RAW, inert_event, one_line, raw_fields
from tbconsole.entry.main import main
from tbconsole.harbor.harborview import harbor_executable, harbor_view
from tbconsole.record import events as ev
from tbconsole.record.enums import AdmissionBy, TrialOutcome, TrialPhase
from tbconsole.record.runfolder import RunFolder, trial_id
from tbconsole.state import reduce_all
from tbconsole.synthetic.captures import SyntheticCaptures
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import FileControls, ListSource, TailSource
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.find import FindScreen
from tbconsole.ui.screens.ledger import LedgerScreen
from tbconsole.ui.screens.transcript import TranscriptScreen
from tbconsole.ui.screens.weight import WeightScreen

from tests_support.ui import wait_for

pytestmark = pytest.mark.timeout(60)

T0 = 1_767_225_600.0
# Markup without a closing tag: a folder name cannot hold "/", and an opening tag is live markup.
TASK = "fix\x1b]0;pwned\x07-\u202etxt.exe-[bold]B-[@click=app.bell]C"
TRIAL = trial_id(TASK, 0, 0, 0)
SHOWN = one_line(TASK)  # what a view draws of it
INSTRUCTION = "Make the failing test in /app pass."
EXCEPTION = "AgentTimeoutError: the agent ran out of time after 900 s"
AGENT_LOG = "mini-swe-agent: giving up on step 12"
REPLY = "I will look at the files first."


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def controls_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if CONTROL.search(line)]


def make_run(root: Path) -> tuple[Path, Path, list[ev.Event]]:
    """A run folder with one trial of TASK (ended in an agent error) and a task of a plain name:
    its events.jsonl, the trial's Harbor folder (result.json naming the task's folder, exception,
    agent log) and its capture file, every one named as the runner would name it."""
    run, tasks = root / "run", root / "tasks"
    task_dir = tasks / TASK
    task_dir.mkdir(parents=True)
    (task_dir / "instruction.md").write_text(INSTRUCTION + "\n")
    trial_dir = RunFolder(run).trials(0) / TRIAL
    (trial_dir / "agent").mkdir(parents=True)
    (trial_dir / "result.json").write_text(json.dumps({"config": {"task": {"path": str(task_dir)}}}))
    (trial_dir / "exception.txt").write_text(EXCEPTION + "\n")
    (trial_dir / "agent" / "mini-swe-agent.txt").write_text(f"\x1b[31m{AGENT_LOG}\x1b[0m\n")
    request = ev.ProxyRequest(
        ts=T0 + 3, step=0, group=0, trial=TRIAL, api="openai", stream=False, status=200, captured=True, turn=0,
        prompt_tokens=40, output_tokens=9, stop_reason="stop",
    )  # fmt: skip
    captures = SyntheticCaptures(run)
    captures.add(request, [{"role": "user", "content": INSTRUCTION}], {"text": REPLY})
    assert captures.write(request)
    events: list[ev.Event] = [
        ev.RunStarted(
            ts=T0, run_id="raw-names", log_path=str(run), model_name="Qwen/Qwen3-4B-Instruct-2507", base_url=None,
            renderer_name=None, total_steps=3, groups_per_batch=1, group_size=1, tasks=[TASK, "plain-task"], config={},
        ),
        ev.BatchStarted(ts=T0 + 1, step=0, groups=[{"group": 0, "task": TASK, "trials": 1}]),
        ev.GroupStarted(ts=T0 + 1, step=0, group=0, task=TASK, trials=[TRIAL], proxy_url="http://127.0.0.1:9"),
        ev.TrialPhaseChanged(
            ts=T0 + 2, step=0, group=0, trial=TRIAL, phase=TrialPhase.AGENT, task=TASK, trial_dir=str(trial_dir)
        ),
        request,
        ev.TrialEnded(
            ts=T0 + 4, step=0, group=0, trial=TRIAL, outcome=TrialOutcome.AGENT_ERROR, scored=False, reward=None,
            turns=1, output_tokens=9, trial_dir=str(trial_dir), timings={}, exception_type="AgentTimeoutError",
            exception_message="the agent ran out of time",
        ),
        ev.GroupEnded(ts=T0 + 5, step=0, group=0, rewards=[None], ok=False, error="AgentTimeoutError"),
    ]  # fmt: skip
    RunFolder(run).events.write_text("".join(e.to_json() + "\n" for e in events))
    return run, trial_dir, events


def test_the_state_keeps_paths_and_ids_and_inerts_the_rest(tmp_path):
    run, trial_dir, events = make_run(tmp_path)
    dropped = ev.TaskAdmission(ts=T0 + 6, task=TASK, weight=0.0, step=1, by=AdmissionBy.USER, reason="x\x1b[2J")
    state = reduce_all([*events, dropped])
    assert state.tasks == [TASK, "plain-task"] and state.log_path == str(run)
    t = state.trials[TRIAL]
    assert (t.task, t.trial_dir) == (TASK, str(trial_dir)) and Path(t.trial_dir).is_dir()
    assert state.ledger.admissions[TASK].weight == 0.0
    # Log lines are text to show: the task they name is made inert there, with the rest.
    assert any(SHOWN in message and "x␛[2J" in message for _, _, message in state.logs)
    assert not [message for _, _, message in state.logs if CONTROL.search(message)]
    # A raw field is one declaration (field metadata); everything unmarked is still made inert.
    hostile = ev.ErrorRaised(step=0, group=0, trial=TRIAL, exception_type="E\x1b[2J", message="m\x07", trial_dir=TASK)
    kept = inert_event(hostile, keep_raw=True)
    assert (kept.trial, kept.trial_dir) == (TRIAL, TASK) and (kept.exception_type, kept.message) == ("E␛[2J", "m␇")
    shown = inert_event(hostile)  # for printing (the headless log): nothing kept
    assert not any(CONTROL.search(str(v)) for v in (shown.trial, shown.trial_dir, shown.message))
    assert raw_fields(ev.TrialEnded) == ("trial", "trial_dir") and raw_fields(ev.LogLine) == ()
    (trial,) = [f for f in dataclasses.fields(ev.TrialEnded) if f.name == "trial"]
    assert dict(trial.metadata) == dict(RAW)


@pytest.mark.e2e
async def test_the_transcript_of_a_trial_whose_folder_name_holds_escapes(tmp_path):
    run, trial_dir, _events = make_run(tmp_path)
    app = ConsoleApp(source=TailSource(run), mode="attach", clock=lambda: T0 + 6)
    async with app.run_test(size=(180, 60)) as pilot:
        await wait_for(pilot, lambda: TRIAL in app.state.trials and app.state.trials[TRIAL].done)
        await wait_for(pilot, lambda: app.screen.grid.selected_trial() == TRIAL)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        await wait_for(pilot, lambda: "turn0" in screen.blocks and "agentlog" in screen.blocks)
        assert screen.files is not None and screen.files.trial_dir == trial_dir
        await pilot.press("home")
        await pilot.pause()
        text = screen_text(app)
        # Found by the real name: the instruction (through result.json's task folder), the
        # exception, the agent's log, the captured turn; none of them "not known yet".
        for found in (INSTRUCTION, EXCEPTION, AGENT_LOG, REPLY, "agent/mini-swe-agent.txt"):
            assert found in text, (found, text)
        assert "not known yet" not in text and not screen.files.problems
        # Drawn inertly: the folder and the task as control pictures, markup as typed.
        assert one_line(str(trial_dir)) in text and SHOWN in text
        assert "␛]0;pwned␇" in text and "<U+202E>" in text and "[bold]B-[@click=app.bell]C" in text
        assert not controls_in(text), controls_in(text)

        # h: the command names the real folder, quoted so that the shell reads exactly it back.
        await pilot.press("h")
        view = harbor_view(trial_dir)
        assert app.clipboard == view.command and not CONTROL.search(view.command)
        words = subprocess.run(["bash", "-c", "printf '%s\\0' " + view.command], capture_output=True, check=True)
        assert words.stdout.split(b"\0")[:-1] == [
            os.fsencode(w) for w in (harbor_executable(), "view", str(trial_dir.parent.parent), "--jobs")
        ]
        assert view.path == f"/jobs/{quote(trial_dir.parent.name)}/trials/{quote(TRIAL)}"
        (note,) = [n for n in app._notifications if n.title.startswith("harbor view")]
        assert view.command in note.message and not CONTROL.search(note.message)
        await pilot.pause()
        assert not controls_in(screen_text(app))

        # f: find across trials reads the capture file named by the real trial id.
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, TranscriptScreen))
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        found_screen = app.screen
        await pilot.press(*"look at", "enter")
        await wait_for(pilot, lambda: found_screen.result is not None and not found_screen.searching)
        assert found_screen.result is not None and [m.trial.trial for m in found_screen.result.matches] == [TRIAL]
        await pilot.pause()
        text = screen_text(app)
        assert "look at" in text and not controls_in(text), controls_in(text)


@pytest.mark.e2e
async def test_the_ledger_sends_the_real_task_name(tmp_path):
    run, _trial_dir, events = make_run(tmp_path)
    inbox = RunFolder(run).control_inbox
    inbox.mkdir(parents=True)
    app = ConsoleApp(source=ListSource(events), controls=FileControls(run), mode="attach", clock=lambda: T0 + 6)

    def sent():
        return [json.loads(p.read_text()) for p in sorted(inbox.glob("*.json"))]

    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: app.state.step == 0)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, LedgerScreen))
        screen = app.screen
        await pilot.press("o", "o")  # by name: the hostile one first ("f" < "p")
        await wait_for(pilot, lambda: screen.table.selected() is not None and screen.table.selected().name == TASK)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await wait_for(pilot, lambda: "fix␛]0;pwned␇" in screen_text(app))  # a prompt wraps the rest
        assert not controls_in(screen_text(app))
        await pilot.press("y")
        await wait_for(pilot, lambda: len(sent()) == 1)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WeightScreen))
        await wait_for(pilot, lambda: "fix␛]0;pwned␇" in screen_text(app))  # a prompt wraps the rest
        assert not controls_in(screen_text(app))
        await pilot.press("ctrl+a", "ctrl+k", "2", "enter")
        await wait_for(pilot, lambda: len(sent()) == 2)
        app.inbox.put_many([ev.TaskAdmission(ts=T0 + 7, task=TASK, weight=2.0, step=1, by=AdmissionBy.USER)])
        await wait_for(
            pilot, lambda: screen.table.selected() is not None and screen.table.selected().admission.weight == 2
        )
        await pilot.press("r")
        await wait_for(pilot, lambda: len(sent()) == 3)
        await wait_for(pilot, lambda: "fix␛]0;pwned␇" in screen_text(app))  # a prompt wraps the rest
        assert not controls_in(screen_text(app))
    assert sent() == [
        {"command": "drop_task", "argument": TASK},
        {"command": "weight_task", "argument": f"{TASK}=2"},
        {"command": "readmit_task", "argument": TASK},
    ]


def test_the_command_line_finds_by_the_real_names_and_prints_them_inertly(tmp_path, capsys):
    run, trial_dir, _events = make_run(tmp_path)
    # export --harbor-view: the trial looked up by its real id; the command printed as plain text.
    assert main(["export", str(run), "--harbor-view", TRIAL]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == harbor_view(trial_dir).command and not CONTROL.search(printed)
    # The text ledger: the task's row, drawn inertly.
    assert main(["ledger", str(run), "--sort", "name"]) == 0
    printed = capsys.readouterr().out
    assert SHOWN in printed and not CONTROL.search(printed), printed
