#!/usr/bin/env python3
"""Rewrite `lib/NAME.c` / `lib/NAME.h` mentions to the file's folder (`lib/sched/drr.h`).

lib/ is in folders by block; comments, docs and scripts written before (or on a branch
that did not know) still say lib/sched/drr.h. This finds every tracked text file's mentions of
a lib/ file by its bare name and writes the folder in. Dated run folders under
docs/results (a YYYY- in the path) are records and stay as they were.

Usage: scripts/fix_lib_paths.py [--check]   (--check: list the files, change nothing;
exit status 1 if there are any)
"""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MENTION = re.compile(r"\blib/([a-z0-9_]+\.[ch])\b")


def main():
    check = "--check" in sys.argv[1:]
    where = {p.name: p.parent.name for p in (REPO / "lib").glob("*/*.[ch]")}
    files = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    changed = []
    for name in files:
        if re.search(r"docs/results/.*/20\d\d-", name):
            continue
        path = REPO / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        new = MENTION.sub(lambda m: "lib/%s/%s" % (where[m.group(1)], m.group(1))
                          if m.group(1) in where else m.group(0), text)
        if new != text:
            changed.append(name)
            if not check:
                path.write_text(new)
    for name in changed:
        print(name)
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
