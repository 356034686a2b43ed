#!/usr/bin/env python3
"""Runs doxygen on docs/Doxyfile (warnings are errors) and reports its warnings
per header. Fails on any warning in a header that is not listed in the pending
file (headers whose documentation is still being written), on a warning that
names no header, and on a pending header that has no warning left (take it off
the list). Usage: check_doxygen.py DOXYGEN DOXYFILE WARNINGS_LOG PENDING SRCDIR"""
import collections
import pathlib
import re
import subprocess
import sys


def main() -> int:
    doxygen, doxyfile, log, pending_file, srcdir = sys.argv[1:6]
    src = pathlib.Path(srcdir).resolve()
    pending = {
        line.split('#', 1)[0].strip()
        for line in pathlib.Path(pending_file).read_text().splitlines()
        if line.split('#', 1)[0].strip()
    }
    log_path = pathlib.Path(log)
    log_path.unlink(missing_ok=True)
    run = subprocess.run([doxygen, doxyfile], capture_output=True, text=True)
    text = log_path.read_text() if log_path.exists() else ''
    text += run.stderr
    per_file = collections.OrderedDict()
    stray = []
    for line in text.splitlines():
        m = re.match(r'^(/[^:]+):(\d+): (.*)$', line)
        if not m:
            if line.strip():
                stray.append(line)
            continue
        path = pathlib.Path(m.group(1)).resolve()
        try:
            rel = str(path.relative_to(src))
        except ValueError:
            rel = str(path)
        per_file.setdefault(rel, []).append(f'{rel}:{m.group(2)}: {m.group(3)}')
    failed = False
    for rel, warnings in per_file.items():
        if rel not in pending:
            failed = True
            print(f'{rel}: {len(warnings)} doxygen warning(s):')
            for w in warnings:
                print('  ' + w)
    for line in stray:
        failed = True
        print('doxygen: ' + line)
    for rel in sorted(pending):
        n = len(per_file.get(rel, []))
        if n == 0:
            failed = True
            print(f'{rel}: no warning left; remove it from {pending_file}')
        else:
            print(f'pending: {rel}: {n} warning(s) left')
    if run.returncode != 0 and not per_file and not stray:
        failed = True
        print(f'doxygen exited with {run.returncode}:\n{run.stdout}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
