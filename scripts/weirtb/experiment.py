"""What the scripts/*_experiments.py share once their runs are done: the commit the results
come from, CSV writing, and the median and range of repeated runs.

Testbed setup and traffic are weirtb's own modules (topology, traffic, bulk, ...); this module
holds only the bookkeeping every experiment repeats, so that each script's results carry the
same commit stamp and tables the same median/range form.
"""
import csv
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def repo_commit(repo=REPO):
    """The commit the results come from (short hash, "-dirty" with uncommitted changes to
    lib/, app/, scripts/ or conf/), or "unknown" outside a git checkout."""
    try:
        h = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--",
                                "lib", "app", "scripts", "conf"],
                               capture_output=True, text=True).stdout.strip()
        return h + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_csv(path, rows, fields=None):
    """rows (dicts) to path with a header; fields default to the first row's keys, in order."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields or rows[0]), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def median_range(values):
    """(median, min, max) of repeated runs' values; NaNs when there are none."""
    v = [x for x in values if x is not None]
    if not v:
        nan = float("nan")
        return nan, nan, nan
    return statistics.median(v), min(v), max(v)
