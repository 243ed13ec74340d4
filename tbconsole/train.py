"""`python -m tbconsole.train KEY=VALUE…`: the headless recipe (same as `tbconsole train --headless`)."""

import sys

from tbconsole.runner.cli import run_train

if __name__ == "__main__":
    sys.exit(run_train(sys.argv[1:], prog="python -m tbconsole.train"))
