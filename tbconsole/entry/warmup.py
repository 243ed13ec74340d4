"""`tbconsole warmup`: the command around the supervised warm-up in ``tbconsole.demo.warmup``."""

from __future__ import annotations

import sys
from pathlib import Path

from tbconsole.entry.usage import UsageError


def register(sub, full: bool) -> None:
    """``full``: add the options (imports ``tbconsole.demo.warmup`` for their defaults; only when `warmup` runs)."""
    p = sub.add_parser(
        "warmup",
        help="make the demo's starting policy by supervised warm-up",
        description="Supervised warm-up of the local model on demonstrations rendered in "
        "the agent's own transcript format (see tbconsole/demo/warmup.py), then an evaluation "
        "on held-out task variants. Writes a PEFT adapter folder.",
    )
    if full:
        add_arguments(p)
        p.set_defaults(handler=run)


def add_arguments(p) -> None:
    from tbconsole.demo.warmup import WarmupSettings

    d = WarmupSettings()
    p.add_argument(
        "--out",
        type=Path,
        default=Path("runs/warmup/policy"),
        help="folder for the adapter, its settings and figures (default: %(default)s)",
    )
    p.add_argument(
        "--prompt",
        type=Path,
        default=None,
        help="an agent-prompt.json recorded earlier (default: record it now with one real trial in the local sandbox)",
    )
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--rank", type=int, default=d.rank)
    p.add_argument("--lr", type=float, default=d.learning_rate)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument(
        "--solution-share",
        type=float,
        default=d.solution_share,
        help="share of demonstrations that run the solution, not a near miss (%(default)s)",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--multi-turn",
        action="store_true",
        help="warm up on the two-command task families (look up, then act): two-turn "
        "demonstrations; the recorded prompt then has an observation-prompt.json beside it",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default: %(default)s)")


def run(args) -> int:
    # A usage error is found before the heavy imports (the cookbook's renderers, the tokenizer).
    if args.steps < 1 or args.rank < 1 or args.batch_size < 1 or not 0 <= args.solution_share <= 1:
        raise UsageError("--steps, --rank and --batch-size must be >= 1 and --solution-share in [0, 1]")
    if args.prompt is not None and not args.prompt.is_file():
        raise UsageError(f"--prompt {args.prompt}: no such file (record one by leaving --prompt out)")

    import asyncio

    from tinker_cookbook.renderers import get_renderer

    from tbconsole.demo import variants
    from tbconsole.demo.warmup import OBSERVATION_FILE, AgentPrompt, WarmupSettings, record_prompts, train
    from tbconsole.engine.registry import load_tokenizer, recommended_renderer, register_with_cookbook

    settings = WarmupSettings(
        rank=args.rank,
        learning_rate=args.lr,
        steps=args.steps,
        batch_size=args.batch_size,
        solution_share=args.solution_share,
        seed=args.seed,
        families=variants.MULTI_TURN_FAMILIES if args.multi_turn else variants.ONE_COMMAND_FAMILIES,
    )
    register_with_cookbook()
    observation = None
    if args.prompt is not None:
        seen = args.prompt.with_name(OBSERVATION_FILE)
        if args.multi_turn and not seen.is_file():
            raise UsageError(f"--multi-turn --prompt {args.prompt}: no {OBSERVATION_FILE} beside it")
        prompt = AgentPrompt.load(args.prompt)
        observation = AgentPrompt.load(seen) if args.multi_turn else None
    else:
        tokenizer = load_tokenizer()
        renderer = get_renderer(recommended_renderer(settings.base_model), tokenizer)
        variant = variants.sample_variants("train", 1, settings.seed, settings.families)[0]
        print(f"recording the agent's prompt: one trial of {variant.name} with its solution scripted", flush=True)
        prompt, observation, reward = asyncio.run(
            record_prompts(args.out.with_name(args.out.name + ".record"), variant, renderer, tokenizer)
        )
        if reward != 1.0:
            print(
                f"the scripted solution of {variant.name} scored {reward}, not 1: the task set or the "
                "sandbox is broken",
                file=sys.stderr,
            )
            return 1
    train(settings, prompt, args.out, device=args.device, observation=observation)
    print(f"policy written to {args.out}")
    return 0
