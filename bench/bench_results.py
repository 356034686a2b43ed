"""What the bench/*_table.sh reports share (imported from their Python).

The run's meta line and 1-minute load samples (bench/lib.sh's bench_meta and
bench_run_json write them into the results directory) and the iterations of
Google Benchmark JSON files, grouped by case.
"""
import json
import os
import re
import sys

# Google Benchmark's time units, in seconds.
UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def meta_and_loads(out):
    """The meta line of the run in `out` and its load samples (a list of floats)."""
    with open(os.path.join(out, "load_samples")) as f:
        loads = [float(x) for x in f.read().split()]
    with open(os.path.join(out, "meta")) as f:
        meta = f.read().strip()
    return meta, loads


def iterations(paths):
    """Case name (without "/real_time" or "/manual_time") -> its iteration runs (JSON dicts), over
    the JSON files `paths`, and whether a case reported an error (printed)."""
    runs, failed = {}, False
    for path in paths:
        with open(path) as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("run_type") != "iteration":
                    continue
                if b.get("error_occurred"):
                    print(f"ERROR {b['name']}: {b.get('error_message')}", file=sys.stderr)
                    failed = True
                    continue
                runs.setdefault(re.sub(r"/(real|manual)_time$", "", b["run_name"]), []).append(b)
    return runs, failed


def seconds(run):
    """The wall time of one iteration of a JSON run, in seconds."""
    return run["real_time"] * UNIT[run.get("time_unit", "ns")]
