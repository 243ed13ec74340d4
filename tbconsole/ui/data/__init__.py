"""Data access for the console: everything it reads from disk (and the run's control inbox it
writes to), as functions and readers that screens and the app call. Screens and widgets never
open a file themselves; presentation (``tbconsole.ui.present``) only turns what is read here into
text. Plain Python, no Textual.

- ``source``: the event sources (live bus, tail of ``events.jsonl``, replay, the kept snapshot),
  the controls (local, or through the run's control inbox) and the runner's lease;
- ``trialfiles``: what a trial left in its folder (ATIF trajectory, verifier output, result);
- ``captures``: the run's capture files: located, followed as they grow, searched;
- ``timeline``: the steps' timelines from ``events.jsonl`` and ``timing_spans.jsonl``;
- ``tokenizer``: the model's tokenizer, to decode captured tokens;
- ``settings``: the user's console settings kept between consoles (the theme last chosen).
"""
