import sys

from tbconsole.cli import main

sys.exit(main())
