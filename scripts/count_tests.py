#!/usr/bin/env python3
"""Counts passed / failed / skipped tests from meson's test log.

    count_tests.py BUILD_DIR    prints "PASSED FAILED SKIPPED" for the last `meson test`

Reads BUILD_DIR/meson-logs/testlog.json (one JSON object per meson test). A
doctest executable counts as its test cases, from its closing line
`[doctest] test cases: N | P passed | F failed | S skipped`; a meson test that
failed without such a line (a crash, a sanitizer abort, a timeout) counts as one
failure on top of what its line said; any other meson test (the consumer tests)
counts as one test.
"""

import json
import re
import sys
from pathlib import Path

DOCTEST = re.compile(
    r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed"
    r"(?:\s*\|\s*(\d+) skipped)?"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
OK = {"OK", "EXPECTEDFAIL"}
SKIP = {"SKIP"}


def count(build_dir: Path) -> tuple[int, int, int]:
    log = build_dir / "meson-logs" / "testlog.json"
    passed = failed = skipped = 0
    if not log.exists():
        return 0, 1, 0  # meson test did not even start
    for line in log.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        t = json.loads(line)
        result = t.get("result", "")
        out = ANSI.sub("", (t.get("stdout") or "") + "\n" + (t.get("stderr") or ""))
        m = None
        for m in DOCTEST.finditer(out):
            pass  # the last summary line of the output
        if m:
            p, f, s = int(m.group(2)), int(m.group(3)), int(m.group(4) or 0)
            passed += p
            skipped += s
            failed += f
            if result not in OK and f == 0:
                failed += 1  # e.g. a leak report at exit after all cases passed
        elif result in OK:
            passed += 1
        elif result in SKIP:
            skipped += 1
        else:
            failed += 1
    return passed, failed, skipped


if __name__ == "__main__":
    print(*count(Path(sys.argv[1])))
