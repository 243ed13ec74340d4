"""`tbconsole export`: a run's scored training trials as records other tools read.

One record per scored trial of a trained step (or of the steps asked for): its id, task, step,
group, reward and advantage, and its conversation as the agent sent it and the policy answered,
from the capture files; with ``tokens``, each sampled reply's token ids and log-probs. Two
formats, one JSON object per line:

- ``sharegpt``: ``{"id", "task", …, "conversations": [{"from": "system"|"human"|"gpt"|"tool",
  "value": …}, …]}`` (``sharegpt``);
- ``atif``: one Agent Trajectory Interchange Format trajectory per line, built and validated with
  Harbor's own models (``atif``), so Harbor reads it back.

The modules, one concern each: ``selection`` (which trials, from events.jsonl), ``advantages``
(the cookbook's rule, reproduced from a group's rewards), ``conversation`` (a capture file as
messages), ``sharegpt`` and ``atif`` (the two formats), ``records`` (the export itself).
Held-out evaluation trials are left out: they were never trained on, have no advantage, and
their tasks must stay out of any data set built from an export to remain held out.
"""
