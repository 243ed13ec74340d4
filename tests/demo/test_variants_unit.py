"""Generated variants: splits, files and the warm-up's pure pieces (no sandbox, no model)."""

import subprocess
import sys

import pytest

from tbconsole.demo import variants as V
from tbconsole.demo import warmup as W


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


def run_here(app, files: dict[str, str], commands: list[str]) -> list[str]:
    """Run ``commands`` in order on the host shell against a copy of the variant's files in
    ``app`` (standing in for /app); their outputs."""
    app.mkdir()
    for name, text in files.items():
        (app / name).write_text(text)
    outputs = []
    for command in commands:
        proc = subprocess.run(
            ["bash", "-c", command.replace("/app/", f"{app}/")],
            check=False,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        )
        outputs.append(proc.stdout)
    return outputs


def answer_of(app, variant: V.Variant) -> str | None:
    answer = app / variant.spec.answer
    return answer.read_text() if answer.exists() else None


@pytest.mark.e2e
@pytest.mark.parametrize("family", sorted(V.FAMILIES))
def test_solution_and_near_misses_run_here_as_the_verifier_expects(tmp_path, family):
    """The commands against the variant's files on the host shell (the sandboxed run is in
    test_variant_tasks): the solution writes the expected answer, no near miss does; the oracle's
    solve.sh solves it too."""
    for variant in [v for v in V.all_variants() if v.family == family][:5]:
        files, expected = variant.files()
        for command, solves in V.iter_commands(variant):
            app = tmp_path / f"{variant.name}-{solves}-{abs(hash(command))}"
            run_here(app, files, variant.steps(command))
            if solves:
                assert answer_of(app, variant) == expected, (variant.name, command)
            else:
                assert answer_of(app, variant) != expected, (variant.name, command)
        solve = (V.write_task(variant, tmp_path / "tasks") / "solution" / "solve.sh").read_text()
        run_here(tmp_path / f"{variant.name}-oracle", files, [solve])
        assert answer_of(tmp_path / f"{variant.name}-oracle", variant) == expected


@pytest.mark.e2e
@pytest.mark.parametrize("family", V.MULTI_TURN_FAMILIES)
def test_only_the_look_up_tells_which_file_to_act_on(tmp_path, family):
    """A two-command variant: the instruction names the pointer file but not the target, the
    look-up prints the target's path, the target differs across variants, and the solution's
    command on any other file of the variant (a decoy, the pointer file) fails."""
    picked = [v for v in V.all_variants() if v.family == family][:20]
    assert len({v.target for v in picked}) > 5
    for variant in picked[:5]:
        files, expected = variant.files()
        assert variant.target not in variant.instruction and V.POINTER in variant.instruction
        assert variant.lookup == f"cat /app/{V.POINTER}"
        assert variant.steps(variant.solution) == [variant.lookup, variant.solution]
        others = [name for name in files if name != variant.target]
        assert len(others) == 1 + V.DECOYS
        app = tmp_path / variant.name
        [seen] = run_here(app, files, [variant.lookup])
        assert seen == W.lookup_output(variant) == f"/app/{variant.target}\n"
        for name in others:
            wrong = tmp_path / f"{variant.name}-{name}"
            run_here(wrong, files, [variant.solution.replace(variant.target, name)])
            assert answer_of(wrong, variant) != expected, (variant.name, name)
        text = (V.write_task(variant, tmp_path / "tasks") / "task.toml").read_text()
        assert "min_commands = 2" in text


def test_two_turn_demonstration_is_one_datum_with_loss_on_both_replies():
    """The continuity form: prompt, look-up reply, observation, final reply in one sequence;
    weights 1 on the replies (on the second only when the history holds the look-up's other
    form), 0 on everything the agent wrote."""
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import get_local_model, load_tokenizer

    tokenizer = load_tokenizer()
    renderer = get_renderer("qwen3_5", tokenizer)
    folder = get_local_model("tbconsole/qwen3-tiny-agent-mt").warm_start
    prompt = W.AgentPrompt.load(folder / "agent-prompt.json")
    observation = W.AgentPrompt.load(folder / W.OBSERVATION_FILE)
    variant = V.all_variants("train", V.MULTI_TURN_FAMILIES)[0]
    context = prompt.tokens(tokenizer, variant.instruction)
    lookup = W.tool_call_reply(renderer, variant.lookup, submit=False)
    seen = observation.tokens(tokenizer, W.observation_text(W.lookup_output(variant)))
    final = W.tool_call_reply(renderer, variant.solution)
    assert W.parse_command(renderer, lookup) == variant.lookup
    assert variant.target in tokenizer.decode(seen)
    for short in (False, True):
        datum = W.demonstration(prompt, renderer, tokenizer, variant, variant.solution, observation, short)
        history = lookup[1:] if short else lookup
        tokens = context + history + seen + final
        assert datum.model_input.to_ints() == tokens[:-1]
        assert datum.loss_fn_inputs["target_tokens"].tolist() == tokens[1:]
        weights = [0.0] * len(context) + [0.0 if short else 1.0] * len(history) + [0.0] * len(seen) + [1.0] * len(final)
        assert datum.loss_fn_inputs["weights"].tolist() == weights[1:]
    with pytest.raises(ValueError, match="observation"):
        W.demonstration(prompt, renderer, tokenizer, variant, variant.solution)


def test_multi_turn_flag_stands_for_keys_the_users_own_override():
    from tbconsole.demo import recipe as demo

    argv = demo.multi_turn_argv(["--headless", "--multi-turn", "config.max_steps=2"])
    assert argv[-2:] == ["--headless", "config.max_steps=2"]
    assert "config.model_name=tbconsole/qwen3-tiny-agent-mt" in argv
    assert demo.multi_turn_argv(["config.max_steps=2"]) == ["config.max_steps=2"]
    assert demo.step_limit_for(V.MULTI_TURN_FAMILIES) >= 3
    assert demo.step_limit_for(demo.DEMO_FAMILIES) == demo.DEMO_STEP_LIMIT == 1


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


@pytest.mark.e2e
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


def test_multi_turn_demo_materializes_two_command_tasks_and_a_step_limit_for_them(tmp_path):
    """`tbconsole demo --multi-turn`: its warm-started model, tasks of the two-command families
    only (train and held-out), and a trial.json whose step limit allows the look-up, the action
    and one more call."""
    import json

    from tbconsole.demo import recipe as demo
    from tbconsole.engine.registry import register_with_cookbook
    from tbconsole.runner.options import parse

    register_with_cookbook()
    argv = demo.multi_turn_argv(["--multi-turn", f"config.log_path={tmp_path / 'run'}", "config.max_steps=2"])
    config = demo.materialize(parse(argv, demo.demo_defaults())).args
    assert config.config.model_name == config.config.kl_reference_config.base_model == demo.MULTI_TURN_MODEL
    train = sorted(p.name for p in (tmp_path / "run" / "tasks-multi-turn").iterdir())
    held = sorted(p.name for p in (tmp_path / "run" / "tasks-multi-turn-heldout").iterdir())
    assert len(train) == 4 and len(held) == demo.HELDOUT_VARIANTS
    assert {V.parse_variant(name.split("-", 1)[1]).family for name in train} == set(V.MULTI_TURN_FAMILIES)
    assert all(V.parse_variant(name).split == "heldout" for name in held)
    trial = json.loads((tmp_path / "run" / demo.DEMO_TRIAL_FILE).read_text())
    assert trial["agent"]["kwargs"]["config"]["agent"]["step_limit"] == demo.MULTI_TURN_STEP_LIMIT >= 3
