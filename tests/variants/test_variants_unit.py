"""Generated variants: splits, files and the warm-up's pure pieces (no sandbox, no model)."""

import subprocess
import sys

import pytest

from tbconsole import variants as V
from tbconsole import warmup as W


def test_splits_are_fixed_disjoint_and_cover_every_family():
    train, held = V.all_variants("train"), V.all_variants("heldout")
    assert not {v.name for v in train} & {v.name for v in held}
    assert len(train) + len(held) == len(V.FAMILIES) * V.VARIANTS_PER_FAMILY
    for family in V.FAMILIES:
        assert any(v.family == family for v in held) and any(v.family == family for v in train)
    assert [v.split for v in held] == ["heldout"] * len(held)  # a property of the name alone


def test_sample_variants_interleaves_families_and_respects_the_split():
    picks = V.sample_variants("heldout", 6, seed=1, families=("count-lines", "sort-unique"))
    assert [v.family for v in picks] == ["count-lines", "sort-unique"] * 3
    assert all(v.split == "heldout" for v in picks)
    assert picks == V.sample_variants("heldout", 6, seed=1, families=("count-lines", "sort-unique"))
    with pytest.raises(ValueError):
        V.sample_variants("test", 1, seed=0)


def test_parse_variant_round_trips_and_rejects_other_names():
    for v in V.all_variants()[::97]:
        assert V.parse_variant(v.name) == v
    for bad in ("count-lines", "count-lines-x", "nope-001", f"count-lines-{V.VARIANTS_PER_FAMILY}"):
        with pytest.raises(ValueError):
            V.parse_variant(bad)


@pytest.mark.parametrize("family", sorted(V.FAMILIES))
def test_solution_and_near_misses_run_here_as_the_verifier_expects(tmp_path, family):
    """The commands against the variant's files on the host shell (the sandboxed run is in
    test_variant_tasks): the solution writes the expected answer, no near miss does."""
    for variant in [v for v in V.all_variants() if v.family == family][:5]:
        files, expected = variant.files()
        for command, solves in V.iter_commands(variant):
            app = tmp_path / f"{variant.name}-{solves}-{abs(hash(command))}"
            app.mkdir()
            for name, text in files.items():
                (app / name).write_text(text)
            subprocess.run(
                ["bash", "-c", command.replace("/app/", f"{app}/")],
                check=False,
                capture_output=True,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            )
            answer = app / variant.spec.answer
            got = answer.read_text() if answer.exists() else None
            if solves:
                assert got == expected, (variant.name, command)
            else:
                assert got != expected, (variant.name, command)


def test_write_task_writes_a_complete_folder_once(tmp_path):
    variant = V.all_variants("train")[0]
    path = V.write_task(variant, tmp_path)
    names = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    assert names == ["environment/setup.sh", "instruction.md", "solution/solve.sh", "task.toml", "tests/test.sh"]
    assert variant.files()[1] in (path / "tests/test.sh").read_text()
    assert V.write_task(variant, tmp_path) == path  # idempotent
    assert [p.name for p in tmp_path.iterdir()] == [variant.name]  # no temporary folder left


def test_write_task_finishes_a_folder_cut_short(tmp_path):
    variant = V.all_variants("train")[1]
    half = tmp_path / variant.name
    (half / "tests").mkdir(parents=True)
    (half / "tests" / "test.sh").write_text("echo 1")  # an earlier write stopped before task.toml
    path = V.write_task(variant, tmp_path)
    assert path == half and (path / "task.toml").is_file()
    assert variant.files()[1] in (path / "tests" / "test.sh").read_text()
    assert not [p for p in path.rglob(".*")]  # no temporary file left


def test_agent_prompt_splice_round_trips(tmp_path):
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import get_local_model, load_tokenizer

    tokenizer = load_tokenizer()
    prompt = W.AgentPrompt.load(get_local_model("tbconsole/qwen3-tiny-agent").warm_start / "agent-prompt.json")
    variant = V.all_variants("train")[3]
    tokens = prompt.tokens(tokenizer, variant.instruction)
    assert W.AgentPrompt.from_capture(tokens, tokenizer, variant.instruction) == prompt
    with pytest.raises(ValueError):
        W.AgentPrompt.from_capture(tokens, tokenizer, "an instruction that is not there")
    renderer = get_renderer("qwen3_5", tokenizer)
    reply = W.tool_call_reply(renderer, variant.solution)
    assert W.parse_command(renderer, reply) == V.agent_command(variant.solution)
    assert W.parse_command(renderer, reply[:-12]) is None  # cut short: no tool call
    # The policy samples the call with or without the blank line in its empty thinking block:
    # both forms hand the agent the same command, and the solution's probability counts both.
    forms = W.reply_forms(renderer, variant.solution)
    assert [len(f) for f in forms] == [len(reply), len(reply) - 1]
    assert tokenizer.decode(forms[1]).startswith("</think>")
    assert {W.parse_command(renderer, f) for f in forms} == {V.agent_command(variant.solution)}


def test_warmup_usage_errors_exit_2_with_a_message(tmp_path):
    for args in (["--steps", "0"], ["--solution-share", "2"], ["--prompt", str(tmp_path / "missing.json")]):
        proc = subprocess.run(
            [sys.executable, "-m", "tbconsole", "warmup", "--out", str(tmp_path / "p"), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert "tbconsole warmup:" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "p").exists()
