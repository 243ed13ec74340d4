"""`python -m tbconsole.train KEY=VALUE…`: the recipe (same as `tbconsole train`)."""

import sys

from tbconsole.entry.train import run_train

if __name__ == "__main__":
    sys.exit(run_train(sys.argv[1:], prog="python -m tbconsole.train"))
