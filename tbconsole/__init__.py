"""tbconsole: a training console for Terminal-Bench RL with Harbor and Tinker."""

from tbconsole.common import offline as _offline

# Before anything imports litellm (Harbor's agents do): no cost-map download at import.
_offline.apply_safe_defaults()

__version__ = "0.1.0"
