"""How a command reports being called wrongly: a message on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys

USAGE_EXIT = 2  # argparse's own status for a bad command line; every command uses it for usage errors


class UsageError(Exception):
    """A mistake in how the command was called: message, exit 2, nothing started."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's default prints usage + exits 2; keep that, add a hint
        self.print_usage(sys.stderr)
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message}\nRun '{self.prog} --help' for the options.\n")
