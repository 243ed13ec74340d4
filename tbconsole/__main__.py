import sys

from tbconsole.entry.main import main

sys.exit(main())
