"""Parameterised tasks: the learnable signal of the demo.

Three families of Terminal-Bench-style tasks solved by one shell command the agent can issue in
its first turn (``ONE_COMMAND_FAMILIES``), and two that take two dependent commands
(``MULTI_TURN_FAMILIES``): the file to act on is named in a pointer file the instruction only
points at, so the agent must look first (``lookup``, e.g. ``cat /app/target.txt``) and then act
on the name the observation shows (the variant's ``target``). A variant is a family's
instruction over its own files (line counts, word lists, logs made from the variant's index):
the command that solves one variant solves them all (for the two-command families: the same
command with the looked-up name), so what is learnt carries over to variants never seen. Task
folders (instruction, ``environment/setup.sh``, ``tests/test.sh`` with the expected answer,
``solution/solve.sh``) are generated on demand.

Each family also names *near misses*: commands that look right and finish the episode but that
the verifier rejects (``wc -l FILE`` prints the name too, ``sort`` keeps duplicates, ``grep``
without ``-c`` prints lines, not a count). The warm-up policy imitates a mix of the solution and its near misses, so
its success rate per group is mixed and the group advantages are non-zero; RL has to discover
which command the verifier rewards.

Splits are fixed by a hash of the variant, so the held-out variants (``heldout``) never appear
in warm-up data or in RL training (``train``).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tbconsole.common.atomic import write_text
from tbconsole.harbor.taskset import CONFIG_FILE, INSTRUCTION_FILE, SETUP_SCRIPT, SOLVE_SCRIPT, TEST_SCRIPT

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's end-of-task marker
HELDOUT_SHARE = 5  # one variant in five is held out
SPLITS = ("train", "heldout")
VARIANTS_PER_FAMILY = 200
WORDS = (
    "apple",
    "bird",
    "cloud",
    "delta",
    "ember",
    "frost",
    "grape",
    "harbor",
    "island",
    "jungle",
    "kettle",
    "lemon",
    "meadow",
    "nickel",
    "orbit",
    "pepper",
    "quartz",
    "river",
    "stone",
    "tiger",
)


@dataclass(frozen=True)
class Variant:
    """One task of a family: the same instruction, its own files (made from ``index``)."""

    family: str
    index: int

    @property
    def name(self) -> str:
        return f"{self.family}-{self.index:03d}"

    @property
    def split(self) -> str:
        digest = hashlib.sha256(self.name.encode()).digest()
        return "heldout" if digest[0] % HELDOUT_SHARE == 0 else "train"

    @property
    def spec(self) -> Family:
        return FAMILIES[self.family]

    @property
    def instruction(self) -> str:
        return self.spec.instruction

    @property
    def target(self) -> str:
        """The file a two-command variant acts on, as its pointer file names it ("" for one-command
        families): what only the look-up finds out."""
        return self._made().target

    @property
    def solution(self) -> str:
        """The command that solves the variant (for a two-command family: its second command)."""
        return self.spec.solution.format(target=self.target)

    @property
    def near_misses(self) -> tuple[str, ...]:
        return tuple(m.format(target=self.target) for m in self.spec.near_misses)

    @property
    def lookup(self) -> str | None:
        """The command that must come first (None: a one-command family)."""
        return self.spec.lookup

    def steps(self, command: str) -> list[str]:
        """The commands the agent issues to end the variant with ``command``, in order: the
        look-up first where there is one. The last is issued with the end-of-task marker."""
        return [self.lookup, command] if self.lookup else [command]

    def files(self) -> tuple[dict[str, str], str]:
        """(the files setup.sh writes under /app, the expected content of the answer file)."""
        made = self._made()
        return made.files, made.expected

    def _made(self) -> Made:
        return self.spec.make(random.Random(f"{self.family}/{self.index}"))


@dataclass(frozen=True)
class Made:
    files: dict[str, str]
    expected: str
    target: str = ""


def _lines_text(rng: random.Random, n: int) -> str:
    return "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(2, 5))) for _ in range(n)) + "\n"


def _word_list(rng: random.Random) -> tuple[str, str]:
    """(a word list with duplicates, its distinct words sorted)."""
    distinct = rng.sample(WORDS, rng.randint(4, 12))
    words = distinct + rng.choices(distinct, k=rng.randint(2, 10))  # at least two duplicates
    rng.shuffle(words)
    while [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]] == sorted(distinct):
        rng.shuffle(words)  # `uniq` alone must not happen to give the answer
    return "\n".join(words) + "\n", "".join(w + "\n" for w in sorted(distinct))


def _count_lines(rng: random.Random) -> Made:
    n = rng.randint(3, 40)
    return Made({"input.txt": _lines_text(rng, n)}, f"{n}\n")


def _sort_unique(rng: random.Random) -> Made:
    words, expected = _word_list(rng)
    return Made({"words.txt": words}, expected)


def _count_errors(rng: random.Random) -> Made:
    total = rng.randint(6, 40)
    errors = rng.randint(1, total - 2)
    levels = ["ERROR"] * errors + rng.choices(["INFO", "WARN", "DEBUG"], k=total - errors)
    rng.shuffle(levels)
    lines = [f"2024-03-{rng.randint(1, 28):02d} {level} {rng.choice(WORDS)} {rng.choice(WORDS)}" for level in levels]
    return Made({"app.log": "\n".join(lines) + "\n"}, f"{errors}\n")


POINTER = "target.txt"  # the two-command families' pointer file, under /app
DECOYS = 2  # files beside the target, so that neither `ls` nor a guess finds it


def _pointed(rng: random.Random, make_one: Callable[[random.Random], tuple[str, str]]) -> Made:
    """A pointer file naming one of 1 + DECOYS files made by ``make_one`` (each: text, the
    answer for that file); every decoy's answer differs from the target's, so acting on the
    wrong file fails."""
    names = rng.sample(WORDS, 1 + DECOYS)
    made = [make_one(rng)]
    while len(made) < len(names):
        text, answer = make_one(rng)
        if answer not in {a for _t, a in made}:
            made.append((text, answer))
    files = {f"{name}.txt": text for name, (text, _answer) in zip(names, made, strict=True)}
    files = dict(sorted(files.items()))  # the target is not always the first file written
    # The whole path, as the second command writes it: the tiny model's tokenizer splits
    # "/app/lemon.txt" and a bare "lemon.txt" differently, and with the bare name it often wrote
    # "/app/app/lemon.txt" or "/app/apple.txt" (7 of 20 names right in at most half the trials).
    files[POINTER] = f"/app/{names[0]}.txt\n"
    return Made(files, made[0][1], target=f"{names[0]}.txt")


def _pointer_count_lines(rng: random.Random) -> Made:
    def one(rng: random.Random) -> tuple[str, str]:
        n = rng.randint(3, 40)
        return _lines_text(rng, n), f"{n}\n"

    return _pointed(rng, one)


def _pointer_sort_unique(rng: random.Random) -> Made:
    return _pointed(rng, _word_list)


@dataclass(frozen=True)
class Family:
    instruction: str
    solution: str  # ``{target}``: the variant's target (two-command families)
    near_misses: tuple[str, ...]
    answer: str  # the file the verifier reads, under /app
    make: Callable[[random.Random], Made]
    description: str
    lookup: str | None = None  # the command that must come first; None: one command solves it


FAMILIES: dict[str, Family] = {
    "count-lines": Family(
        instruction="Write the number of lines in /app/input.txt to /app/count.txt (just the number).",
        solution="wc -l < /app/input.txt > /app/count.txt",
        near_misses=("wc -l /app/input.txt > /app/count.txt", "wc -w < /app/input.txt > /app/count.txt"),
        answer="count.txt",
        make=_count_lines,
        description="Count the lines of a file.",
    ),
    "sort-unique": Family(
        instruction="Write the distinct lines of /app/words.txt, sorted, to /app/sorted.txt.",
        solution="sort -u /app/words.txt > /app/sorted.txt",
        near_misses=("sort /app/words.txt > /app/sorted.txt", "uniq /app/words.txt > /app/sorted.txt"),
        answer="sorted.txt",
        make=_sort_unique,
        description="Sort a word list and drop the duplicates.",
    ),
    "count-errors": Family(
        instruction="Write how many lines of /app/app.log contain ERROR to /app/errors.txt (just the number).",
        solution="grep -c ERROR /app/app.log > /app/errors.txt",
        near_misses=("grep ERROR /app/app.log > /app/errors.txt", "wc -l < /app/app.log > /app/errors.txt"),
        answer="errors.txt",
        make=_count_errors,
        description="Count the error lines of a log.",
    ),
    # Two commands: the instruction names the pointer file, not the file to act on. Near
    # misses act on the right file (the name copied from the observation) with the wrong
    # command, as in the one-command families.
    "pointer-count-lines": Family(
        instruction=f"The file /app/{POINTER} names a file in /app. Write the number of lines in "
        "that file to /app/count.txt (just the number).",
        solution="wc -l < /app/{target} > /app/count.txt",
        near_misses=("wc -l /app/{target} > /app/count.txt", "wc -w < /app/{target} > /app/count.txt"),
        answer="count.txt",
        make=_pointer_count_lines,
        description="Count the lines of the file a pointer file names.",
        lookup=f"cat /app/{POINTER}",
    ),
    "pointer-sort-unique": Family(
        instruction=f"The file /app/{POINTER} names a word list in /app. Write the distinct lines of "
        "that list, sorted, to /app/sorted.txt.",
        solution="sort -u /app/{target} > /app/sorted.txt",
        near_misses=("sort /app/{target} > /app/sorted.txt", "uniq /app/{target} > /app/sorted.txt"),
        answer="sorted.txt",
        make=_pointer_sort_unique,
        description="Sort the word list a pointer file names and drop the duplicates.",
        lookup=f"cat /app/{POINTER}",
    ),
}
ONE_COMMAND_FAMILIES = tuple(name for name, f in FAMILIES.items() if f.lookup is None)
MULTI_TURN_FAMILIES = tuple(name for name, f in FAMILIES.items() if f.lookup is not None)


def all_variants(split: str | None = None, families: tuple[str, ...] | None = None) -> list[Variant]:
    """Every variant of ``families`` (default: all), in a fixed order; only ``split``'s if given."""
    out = [Variant(f, i) for f in families or FAMILIES for i in range(VARIANTS_PER_FAMILY)]
    return [v for v in out if split is None or v.split == split]


def sample_variants(split: str, n: int, seed: int, families: tuple[str, ...] | None = None) -> list[Variant]:
    """``n`` variants of ``split``, round-robin over ``families`` (default: all), chosen by ``seed``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    rng = random.Random(seed)
    pools = {f: all_variants(split, (f,)) for f in families or FAMILIES}
    for pool in pools.values():
        rng.shuffle(pool)
    picks = itertools.islice(itertools.chain.from_iterable(zip(*pools.values(), strict=False)), n)
    return list(picks)


def parse_variant(name: str) -> Variant:
    """The variant a task folder name stands for (``count-lines-007``)."""
    family, _, index = name.rpartition("-")
    if family in FAMILIES and index.isdigit() and int(index) < VARIANTS_PER_FAMILY:
        return Variant(family, int(index))
    raise ValueError(f"not a task variant name: {name!r}")


TASK_TOML = """schema_version = "1.1"

[task]
name = "tbconsole/{name}"
description = "{description}"
keywords = ["variants", "{family}"]

[metadata]
difficulty = "easy"
category = "{family}"
split = "{split}"
min_commands = {min_commands}

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 120.0

[environment]
workdir = "/app"
cpus = 1
memory_mb = 512
"""

TEST_SH = """#!/bin/bash
# Reward 1 iff /app/{answer} holds exactly the expected answer.
mkdir -p /logs/verifier
if cmp -s /app/{answer} - <<'TBCONSOLE_EXPECTED'
{expected}TBCONSOLE_EXPECTED
then echo PASS; echo 1 > /logs/verifier/reward.txt
else echo FAIL; echo 0 > /logs/verifier/reward.txt; fi
"""


def _setup_sh(files: dict[str, str]) -> str:
    out = ["#!/bin/bash", "set -e"]
    for name, text in files.items():
        out += [f"cat > /app/{name} <<'TBCONSOLE_DATA'", text + "TBCONSOLE_DATA"]
    return "\n".join(out) + "\n"


def write_task(variant: Variant, dest: Path, folder: str | None = None) -> Path:
    """The variant's task folder under ``dest``. Each file is written whole and ``task.toml``
    last: a folder is a task only once it has one (``taskset.discover``), so a write cut short
    is finished by the next call instead of being taken for a task."""
    spec = variant.spec
    final = dest / (folder or variant.name)
    if (final / CONFIG_FILE).is_file():
        return final
    files, expected = variant.files()
    scripts = {
        SETUP_SCRIPT: _setup_sh(files),
        TEST_SCRIPT: TEST_SH.format(answer=spec.answer, expected=expected),
        SOLVE_SCRIPT: "#!/bin/bash\n" + "\n".join(variant.steps(variant.solution)) + "\n",
    }
    write_text(final / INSTRUCTION_FILE, variant.instruction + "\n")
    for rel, text in scripts.items():
        write_text(final / rel, text).chmod(0o755)
    write_text(
        final / CONFIG_FILE,
        TASK_TOML.format(
            name=variant.name,
            description=spec.description,
            family=variant.family,
            split=variant.split,
            min_commands=len(variant.steps(variant.solution)),
        ),
    )
    return final


def write_taskset(dest: Path, variants: list[Variant]) -> list[Path]:
    return [write_task(v, dest) for v in variants]


def agent_command(command: str) -> str:
    """The command as the agent issues it: the action, then the end-of-task marker."""
    return f"{command} && {SUBMIT}"


def iter_commands(variant: Variant) -> Iterator[tuple[str, bool]]:
    """(command, solves the task?) for the solution and each near miss (for a two-command family:
    the command issued after the look-up)."""
    yield variant.solution, True
    for miss in variant.near_misses:
        yield miss, False
