"""The demo's starting policy, by supervised warm-up through the engine (the `tbconsole warmup`
command around it is ``tbconsole.entry.warmup``).

A random-init model never emits a valid tool call, so RL on it has nothing to learn from. The
warm-up teaches the small local model the agent's own transcript format first:

1. **The agent's prompt, recorded live.** One real trial (Harbor, the local sandbox,
   mini-swe-agent through the capture proxy, the solution scripted as the reply) gives the
   exact tokens of the agent's first prompt. The user message is cut around the task's
   instruction (``AgentPrompt``), so any variant's prompt is those tokens with its own
   instruction spliced in. The splice is checked against the recorded tokens before use.
2. **Demonstrations** (``variants``): a train-split variant's prompt, then a reply in the
   renderer's tool-call format whose command is the solution with probability
   ``solution_share`` and otherwise one of the family's near misses. A policy that imitates
   this mix succeeds some of the time, so group rewards are mixed and RL has a signal.
3. **Training** is the cookbook's supervised loss through the Tinker SDK: ``forward_backward``
   with ``cross_entropy`` (weights on the reply tokens only) and ``optim_step``, against the
   local engine; the adapter is then saved for the sampler and exported.
4. **Evaluation** on held-out variants (never trained on): how often a sampled reply is a
   valid tool call, the exact solution, or an exact near miss.

The exported folder (PEFT ``adapter_model.safetensors`` + ``adapter_config.json`` + this run's
settings and figures in ``warmup.json``) is what the engine merges into the base model for
``tbconsole/qwen3-tiny-agent``.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tbconsole.common.atomic import replace_dir, write_json
from tbconsole.demo import variants as V

TOOL_NAME = "bash"
OBSERVATION_FILE = "observation-prompt.json"  # beside agent-prompt.json: the second-turn splice


# --------------------------------------------------------------------------------- prompt
@dataclass(frozen=True)
class AgentPrompt:
    """The agent's first prompt, in tokens, with the task instruction cut out of the user
    message: ``prefix`` (system turn and user header), ``before``/``after`` (user text around
    the instruction), ``suffix`` (end of the user turn and the assistant header)."""

    prefix: list[int]
    before: str
    after: str
    suffix: list[int]

    def tokens(self, tokenizer: Any, instruction: str) -> list[int]:
        text = self.before + instruction.strip() + self.after
        return self.prefix + tokenizer.encode(text, add_special_tokens=False) + self.suffix

    def save(self, path: Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> AgentPrompt:
        return cls(**json.loads(Path(path).read_text()))

    @classmethod
    def from_capture(cls, tokens: list[int], tokenizer: Any, instruction: str) -> AgentPrompt:
        """Cut a recorded first prompt around ``instruction``; raises ValueError if the user
        message does not re-encode to the same tokens (then a splice would not be exact)."""
        start_id = tokenizer.convert_tokens_to_ids("<|im_start|>")
        end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        starts = [i for i, t in enumerate(tokens) if t == start_id]
        user = next((i for i in starts if tokenizer.decode(tokens[i + 1 : i + 3]).startswith("user")), None)
        if user is None:
            raise ValueError("no user turn in the recorded prompt")
        head = user + 1
        while tokenizer.decode(tokens[user + 1 : head]) != "user\n":
            head += 1
            if head - user > 4:
                raise ValueError("unexpected user header in the recorded prompt")
        end = tokens.index(end_id, head)
        text = tokenizer.decode(tokens[head:end])
        if tokenizer.encode(text, add_special_tokens=False) != tokens[head:end]:
            raise ValueError("the user message does not re-encode to its recorded tokens")
        at = text.find(instruction.strip())
        if at < 0:
            raise ValueError("the instruction is not in the recorded user message")
        prompt = cls(tokens[:head], text[:at], text[at + len(instruction.strip()) :], tokens[end:])
        if prompt.tokens(tokenizer, instruction) != tokens:
            raise ValueError("splicing the instruction back does not reproduce the recorded prompt")
        return prompt


def tool_call_reply(renderer: Any, command: str, submit: bool = True) -> list[int]:
    """The tokens of an assistant turn that runs ``command`` (and submits, unless ``submit`` is
    False: a look-up), as the renderer writes it: what the policy must sample for the proxy to
    hand the agent that tool call."""
    from tinker_cookbook.renderers.base import Message, ToolCall

    from tbconsole.proxy.scripted import reply_tokens

    issued = V.agent_command(command) if submit else command
    call = ToolCall(
        function=ToolCall.FunctionBody(name=TOOL_NAME, arguments=json.dumps({"command": issued})),
        id="call_0",
    )
    return reply_tokens(renderer, Message(role="assistant", content="", tool_calls=[call]))


def parse_command(renderer: Any, tokens: list[int]) -> str | None:
    """The bash command of a sampled reply, or None when it is no valid tool call."""
    message, _ok = renderer.parse_response(list(tokens))
    calls = message.get("tool_calls") or []
    if len(calls) != 1 or calls[0].function.name != TOOL_NAME:
        return None
    try:
        command = json.loads(calls[0].function.arguments).get("command")
    except (ValueError, AttributeError):
        return None
    return command if isinstance(command, str) else None


@dataclass
class ScriptedTrial:
    reward: float
    prompts: list[list[int]]  # the prompt tokens of each model call, in order
    events: list  # what the trial published (TrialEnded among them)


async def scripted_trial(
    work_dir: Path,
    variant: V.Variant,
    command: str | list[str],
    renderer: Any,
    tokenizer: Any,
    max_tokens: int = 128,
    *,
    trial_config: dict | None = None,
    task_dir: Path | None = None,
    group: int = 0,
) -> ScriptedTrial:
    """One real trial of ``variant`` (Harbor, the local sandbox, mini-swe-agent through the
    capture proxy) in which model call *i* is answered with a tool call running ``command[i]``
    (the last with the end-of-task marker; calls past the end repeat it); a single command
    answers every call. ``trial_config`` defaults to the demo's for the variant's family.
    ``task_dir``: a task folder to run instead of the variant's own (a test's planted task);
    ``group``: the group of step 0 it runs as, so that trials run one after another in one
    ``work_dir`` make one run folder."""
    from tbconsole.demo.recipe import demo_trial_config, step_limit_for
    from tbconsole.proxy.scripted import Scripted, ScriptedSampler
    from tbconsole.record.control import RunControl
    from tbconsole.runner.dataset import HarborGroupBuilder
    from tbconsole.runner.rollout import RunContext, run_group
    from tbconsole.runner.trials import load_template

    work_dir.mkdir(parents=True, exist_ok=True)
    trial_json = work_dir / "trial.json"
    write_json(trial_json, trial_config or demo_trial_config(max_tokens, step_limit_for((variant.family,))))
    commands = [command] if isinstance(command, str) else list(command)
    replies = [tool_call_reply(renderer, c, submit=i == len(commands) - 1) for i, c in enumerate(commands)]
    sampler = ScriptedSampler(
        renderer, default=lambda call: Scripted(tokens=replies[min(len(sampler.calls), len(replies)) - 1])
    )
    events: list = []
    ctx = RunContext(
        publish=events.append,
        control=RunControl(events.append),
        log_path=work_dir,
        renderer=renderer,
        tokenizer=tokenizer,
        template=load_template(trial_json),
        max_tokens=max_tokens,
    )
    builder = HarborGroupBuilder(
        task_dir=task_dir or V.write_task(variant, work_dir / "tasks"),
        task_index=0,
        batch=0,
        group=group,
        group_size=1,
    )
    await run_group(ctx, builder, sampler)
    return ScriptedTrial(builder.rewards[0].reward, [call.prompt for call in sampler.calls], events)


def observation_text(output: str) -> str:
    """A command's output as it stands in the agent's observation: the body of a JSON string
    (the agent reports ``{"returncode": …, "output": "…"}``)."""
    return json.dumps(output)[1:-1]


def lookup_output(variant: V.Variant) -> str:
    """What the look-up prints for ``variant``: its pointer file, which names the target."""
    return variant.files()[0][V.POINTER]


def extends(longer: list[int], shorter: list[int]) -> bool:
    return longer[: len(shorter)] == shorter


async def record_prompts(
    work_dir: Path, variant: V.Variant, renderer: Any, tokenizer: Any
) -> tuple[AgentPrompt, AgentPrompt | None, float]:
    """Run one real trial of ``variant`` with its solution scripted as the replies (the look-up
    first, for a two-command family); return the cut first prompt, the cut observation (None
    for a one-command family) and the verifier's reward.

    The observation is what the agent's second prompt adds after the look-up's reply: the end
    of that turn, the agent's observation message with the look-up's output cut out, and the
    next assistant header. Splicing it needs the second prompt to extend the first prompt and
    the reply exactly, as under token continuity (and as the renderer's history form of this
    reply happens to be too); ValueError otherwise."""
    trial = await scripted_trial(work_dir, variant, variant.steps(variant.solution), renderer, tokenizer)
    prompt, observation = cut_prompts(trial, variant, renderer, tokenizer)
    return prompt, observation, trial.reward


def cut_prompts(
    trial: ScriptedTrial, variant: V.Variant, renderer: Any, tokenizer: Any
) -> tuple[AgentPrompt, AgentPrompt | None]:
    """The cut first prompt and observation (``record_prompts``) of a trial of ``variant`` whose
    first reply ran its look-up (for a two-command family)."""
    if not trial.prompts:
        raise RuntimeError("the agent made no model call")
    prompt = AgentPrompt.from_capture(trial.prompts[0], tokenizer, variant.instruction)
    if variant.lookup is None:
        return prompt, None
    if len(trial.prompts) < 2:
        raise RuntimeError(f"the agent made {len(trial.prompts)} model call(s), not 2")
    head = trial.prompts[0] + tool_call_reply(renderer, variant.lookup, submit=False)
    second = trial.prompts[1]
    if not extends(second, head):
        raise ValueError("the second prompt does not extend the first prompt and the look-up's reply")
    observation = AgentPrompt.from_capture(second[len(head) :], tokenizer, observation_text(lookup_output(variant)))
    return prompt, observation


# --------------------------------------------------------------------------------- data
@dataclass
class WarmupSettings:
    base_model: str = "tbconsole/qwen3-tiny"
    rank: int = 32
    learning_rate: float = 2e-3
    steps: int = 400
    batch_size: int = 8
    solution_share: float = 0.25  # how often a demonstration is the solution
    seed: int = 0
    eval_variants: int = 24
    eval_samples: int = 4
    max_tokens: int = 96
    families: tuple[str, ...] = V.ONE_COMMAND_FAMILIES
    # Two-command demonstrations: how often the look-up's reply in the history is the policy's
    # other form of it (no blank line in the empty thinking block). Under token continuity a
    # later prompt holds the reply exactly as sampled, and the policy samples both forms.
    short_history_share: float = 1 / 3


def demonstration(
    prompt: AgentPrompt,
    renderer: Any,
    tokenizer: Any,
    variant: V.Variant,
    command: str,
    observation: AgentPrompt | None = None,
    short_history: bool = False,
):
    """One supervised datum: the agent's prompt for ``variant``, then a reply running ``command``;
    the loss weights cover the replies only.

    For a two-command family the datum is the whole trial as the policy sees it with token
    continuity: the prompt, the look-up's reply, the observation (``observation`` spliced with
    the look-up's output), then the reply running ``command``. Both replies carry loss, unless
    ``short_history``: then the look-up's reply is the policy's other form of it (as sampled,
    kept verbatim by continuity) and only the second reply carries loss, since the first is
    taught in the renderer's form."""
    import tinker

    context = prompt.tokens(tokenizer, variant.instruction)
    reply = tool_call_reply(renderer, command)
    if variant.lookup is None:
        tokens = context + reply
        weights = [0.0] * len(context) + [1.0] * len(reply)
    else:
        if observation is None:
            raise ValueError(f"{variant.family} takes two commands: its demonstration needs the observation")
        forms = reply_forms(renderer, variant.lookup, submit=False)
        lookup = forms[-1] if short_history else forms[0]
        seen = observation.tokens(tokenizer, observation_text(lookup_output(variant)))
        tokens = context + lookup + seen + reply
        weights = (
            [0.0] * len(context)
            + [0.0 if short_history else 1.0] * len(lookup)
            + [0.0] * len(seen)
            + [1.0] * len(reply)
        )
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(tokens[:-1]),
        # tinker annotates loss_fn_inputs as dict[str, TensorData], but Datum.__post_init__ takes
        # lists too and converts them by key (int64 target tokens, float32 weights).
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights[1:]},  # type: ignore[dict-item]
    )


def choose_command(variant: V.Variant, rng: random.Random, solution_share: float) -> str:
    if rng.random() < solution_share:
        return variant.solution
    return rng.choice(variant.near_misses)


@dataclass
class EvalResult:
    samples: int = 0
    valid: int = 0
    solution: int = 0
    near_miss: int = 0
    lookup: int = 0  # two-command families: trials whose first reply was the look-up
    by_family: dict[str, list[int]] = field(default_factory=dict)  # family -> [solution, samples]

    def rates(self) -> dict[str, float]:
        n = max(self.samples, 1)
        out = {
            "valid_tool_call": self.valid / n,
            "solution": self.solution / n,
            "near_miss": self.near_miss / n,
            "copied_exactly": (self.solution + self.near_miss) / n,
        }
        two_command = any(V.FAMILIES[f].lookup for f in self.by_family)
        return out | ({"lookup": self.lookup / n} if two_command else {})

    def classify(self, variant: V.Variant, command: str | None) -> None:
        """Count one trial's final command (None: no valid tool call)."""
        self.samples += 1
        self.valid += command is not None
        fam = self.by_family.setdefault(variant.family, [0, 0])
        fam[1] += 1
        if command == V.agent_command(variant.solution):
            self.solution += 1
            fam[0] += 1
        elif command in {V.agent_command(m) for m in variant.near_misses}:
            self.near_miss += 1


def evaluate(
    sampling_client: Any,
    prompt: AgentPrompt,
    renderer: Any,
    tokenizer: Any,
    held_out: list[V.Variant],
    samples: int,
    max_tokens: int,
    seed: int,
    observation: AgentPrompt | None = None,
) -> EvalResult:
    """Sample each held-out variant's prompt ``samples`` times (temperature 1) and classify. A
    two-command variant's trial goes on only if its first reply is the look-up: its second
    prompt is spliced with the observation, sampled once, and classified."""
    import tinker

    params = tinker.SamplingParams(
        max_tokens=max_tokens, temperature=1.0, seed=seed, stop=renderer.get_stop_sequences()
    )
    futures = [
        (
            v,
            sampling_client.sample(
                tinker.ModelInput.from_ints(prompt.tokens(tokenizer, v.instruction)), samples, params
            ),
        )
        for v in held_out
    ]
    result = EvalResult()
    second = []
    for variant, future in futures:
        for seq in future.result().sequences:
            command = parse_command(renderer, seq.tokens)
            if variant.lookup is None:
                result.classify(variant, command)
            elif command != variant.lookup or observation is None:
                result.classify(variant, None if command is None else "")  # acted before looking
            else:
                result.lookup += 1
                # The next prompt as token continuity builds it: the reply exactly as sampled
                # (closed by the end of turn if the sample stopped before it), the observation.
                history = list(seq.tokens)
                end = tokenizer.convert_tokens_to_ids("<|im_end|>")
                if history[-1:] != [end]:
                    history.append(end)
                context = (
                    prompt.tokens(tokenizer, variant.instruction)
                    + history
                    + observation.tokens(tokenizer, observation_text(lookup_output(variant)))
                )
                second.append((variant, sampling_client.sample(tinker.ModelInput.from_ints(context), 1, params)))
    for variant, future in second:
        result.classify(variant, parse_command(renderer, future.result().sequences[0].tokens))
    return result


def _log(message: str) -> None:
    print(message, flush=True)


def reply_forms(renderer: Any, command: str, submit: bool = True) -> list[list[int]]:
    """Every token sequence the policy samples to hand the agent a tool call running ``command``:
    the renderer's own (its empty thinking block closes after a blank line, ``\\n</think>``) and
    the same without that blank line (``</think>`` at once), which the policy samples as often
    or more. Both parse to the same call; which one a policy prefers turns on small things in
    its prompt (the sandbox's kernel version is in it), so a probability of the solution
    counts both."""
    reply = tool_call_reply(renderer, command, submit)
    forms = [reply]
    if reply and not renderer.tokenizer.decode(reply[:1]).strip():
        forms.append(reply[1:])
    return forms


def reply_probabilities(
    sampling_client: Any, context: list[int], renderer: Any, commands: Iterable[str]
) -> dict[str, float]:
    """The policy's probability of answering ``context`` (a prompt as the proxy rendered it) with
    a tool call running each command, over all the forms it can sample it in: the solution's is
    the policy's expected reward on that prompt, with no sampling noise."""
    import math

    import tinker

    futures: dict[str, list] = {}
    for command in commands:
        futures[command] = [
            (len(form), sampling_client.compute_logprobs(tinker.ModelInput.from_ints(context + form)))
            for form in reply_forms(renderer, command)
        ]
    return {cmd: sum(math.exp(sum(f.result()[-n:])) for n, f in forms) for cmd, forms in futures.items()}


def train(
    settings: WarmupSettings,
    prompt: AgentPrompt,
    out_dir: Path,
    *,
    device: str = "auto",
    log=_log,
    observation: AgentPrompt | None = None,
) -> dict[str, Any]:
    """Warm up a LoRA adapter on ``settings.base_model`` and export it to ``out_dir``
    (``observation``: the recorded second-turn splice, for two-command families)."""
    import tinker
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.checkpoints import CheckpointRef
    from tbconsole.engine.embedded import EmbeddedEngine
    from tbconsole.engine.registry import load_tokenizer, recommended_renderer

    tokenizer = load_tokenizer()
    renderer = get_renderer(recommended_renderer(settings.base_model), tokenizer)
    batches = _DemonstrationBatches(settings, prompt, observation, renderer, tokenizer)
    held_out = V.sample_variants("heldout", settings.eval_variants, settings.seed, settings.families)
    scratch = out_dir.with_name(out_dir.name + ".engine")
    started = time.monotonic()
    with EmbeddedEngine(data_dir=scratch, device=device, model=settings.base_model) as engine:
        service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
        client = _resolved(
            service.create_lora_training_client(base_model=settings.base_model, rank=settings.rank, seed=settings.seed)
        )
        history = _fit(client, batches, settings, log, started)
        path = client.save_weights_for_sampler("warmup").result().path
        sampler = _resolved(service.create_sampling_client(model_path=path))
        result = evaluate(
            sampler,
            prompt,
            renderer,
            tokenizer,
            held_out,
            settings.eval_samples,
            settings.max_tokens,
            settings.seed,
            observation,
        )
        assert engine.engine is not None  # set by the with block's start
        folder = engine.engine.store.dir_for(CheckpointRef.parse(path))
    # The export is built beside out_dir and put in its place whole: a run that fails leaves the
    # previous export as it was. The engine's folder (scratch) is read before it is removed.
    with replace_dir(out_dir) as out_tmp:
        for name in ("adapter_model.safetensors", "adapter_config.json"):
            shutil.copy2(folder / name, out_tmp / name)
        shutil.rmtree(scratch, ignore_errors=True)
        report = _report(settings, started, history, held_out, result)
        write_json(out_tmp / "warmup.json", report)
        prompt.save(out_tmp / "agent-prompt.json")
        if observation is not None:
            observation.save(out_tmp / OBSERVATION_FILE)
    log(f"held-out: {json.dumps(report['held_out'] | {'variants': len(held_out)})}")
    return report


class _DemonstrationBatches:
    """Batches of demonstrations on train-split variants, drawn from one rng seeded by the
    settings: the same settings give the same batches in the same order."""

    def __init__(
        self,
        settings: WarmupSettings,
        prompt: AgentPrompt,
        observation: AgentPrompt | None,
        renderer: Any,
        tokenizer: Any,
    ) -> None:
        self._settings = settings
        self._prompt, self._observation = prompt, observation
        self._renderer, self._tokenizer = renderer, tokenizer
        self._rng = random.Random(settings.seed)
        self._pool = V.all_variants("train", settings.families)

    def next(self) -> list:
        """``batch_size`` demonstrations: each a variant, its solution or a near miss, and for a
        two-command family sometimes the look-up's shorter reply form in its history."""
        batch = []
        for _ in range(self._settings.batch_size):
            variant = self._rng.choice(self._pool)
            command = choose_command(variant, self._rng, self._settings.solution_share)
            short = variant.lookup is not None and self._rng.random() < self._settings.short_history_share
            batch.append(
                demonstration(self._prompt, self._renderer, self._tokenizer, variant, command, self._observation, short)
            )
        return batch


def _fit(client: Any, batches: _DemonstrationBatches, settings: WarmupSettings, log, started: float) -> list[dict]:
    """``settings.steps`` supervised steps on fresh batches; returns each step's loss per
    trained token, logging every 25th step and the last."""
    import tinker

    history: list[dict[str, float]] = []
    for step in range(settings.steps):
        batch = batches.next()
        lr = _learning_rate(settings, step)
        fwd = client.forward_backward(batch, "cross_entropy")
        opt = client.optim_step(tinker.AdamParams(learning_rate=lr))
        metrics = fwd.result().metrics
        opt.result()
        tokens = sum(sum(d.loss_fn_inputs["weights"].tolist()) for d in batch)
        loss = metrics.get("loss:sum", 0.0) / max(tokens, 1)
        history.append({"step": step, "loss": loss})
        if step % 25 == 0 or step == settings.steps - 1:
            log(
                f"warmup step {step:4d}/{settings.steps}  loss/token {loss:.4f}  lr {lr:.2e}  "
                f"{time.monotonic() - started:6.0f}s"
            )
    return history


def _learning_rate(settings: WarmupSettings, step: int) -> float:
    """Linear decay over the last quarter: the end of the run settles instead of jumping."""
    tail = max(1, settings.steps // 4)
    return settings.learning_rate * min(1.0, (settings.steps - step) / tail)


def _report(
    settings: WarmupSettings, started: float, history: list[dict], held_out: list[V.Variant], result: EvalResult
) -> dict[str, Any]:
    """warmup.json: the settings, the run's seconds, the last step's loss and the held-out figures."""
    return {
        "settings": asdict(settings),
        "seconds": round(time.monotonic() - started, 1),
        "final_loss": history[-1]["loss"] if history else None,
        "held_out": {
            "variants": [v.name for v in held_out],
            **result.rates(),
            "solution_by_family": {k: v[0] / v[1] for k, v in result.by_family.items()},
        },
    }


def _resolved(client_or_future: Any) -> Any:
    """The SDK hands clients back as futures in newer versions and directly in older ones."""
    import tinker

    if isinstance(client_or_future, (tinker.TrainingClient, tinker.SamplingClient)):
        return client_or_future
    return client_or_future.result()
