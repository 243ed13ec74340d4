#!/usr/bin/env bash
# The docs, checked and built: every relative link in README.md (the front door, read on its own)
# must name a file of the repository, then the site is built strict into site/ (mkdocs.yml: a
# broken link or anchor, a page left out of the nav or a missing snapshot picture fails it). The
# build is offline: the theme loads no web fonts and no plugin reaches the network.
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/python - README.md <<'PY'
import re
import sys
from pathlib import Path

broken = []
for name in sys.argv[1:]:
    text = Path(name).read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # fenced code
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the page itself
        path = target.split("#", 1)[0]
        if not (Path(name).parent / path).exists():
            broken.append(f"{name}: link to {target}: no such file")
if broken:
    print("\n".join(broken), file=sys.stderr)
    sys.exit(1)
PY

# (--quiet would hide the warnings that strict counts: only the INFO lines are left out.)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict 2>&1 | { grep -v '^INFO ' || true; }
echo "docs: README.md's links resolve; site/ built (open site/index.html)"
