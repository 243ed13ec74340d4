"""Advisories: conditions in a run worth a look before they cost it, as events.

Pure rules (no I/O, no clock of their own) over the run's event stream and a few facts the runner
measures (free disk space, what a capture file holds, agent timeouts, SDK retries). The runner's
watcher (``tbconsole.runner.advise``) feeds them and publishes what they raise and clear, so
``events.jsonl`` holds the advisories: attach and replay see them like any other event.

- ``thresholds``: every threshold and its default (``advise.<name>=<value>`` on the command line)
- ``base``: the rule's shape and what rules share; ``facts``: the runner's measurements
- one module per concern: ``signal``, ``stalls``, ``limits``, ``training``, ``hacking`` (what
  the trials' commands did: ``runner.replies`` reads them), ``integrity``, ``gateway``, ``disk``
- ``advisor``: feeds the rules, raises and clears, disables a rule that crashes; ``replay``
"""

from tbconsole.advisories.advisor import RULE_CLASSES, Advisor, replay
from tbconsole.advisories.thresholds import DOCS, RULES, Thresholds, problems

__all__ = ["DOCS", "RULES", "RULE_CLASSES", "Advisor", "Thresholds", "problems", "replay"]
