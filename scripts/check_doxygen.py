#!/usr/bin/env python3
"""Runs doxygen on docs/Doxyfile and fails on any warning (an undocumented
public entity, a broken reference), listing the warnings per header.
Usage: check_doxygen.py DOXYGEN DOXYFILE WARNINGS_LOG SRCDIR"""
import collections
import pathlib
import re
import subprocess
import sys


def main() -> int:
    doxygen, doxyfile, log, srcdir = sys.argv[1:5]
    src = pathlib.Path(srcdir).resolve()
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
    for rel, warnings in per_file.items():
        print(f'{rel}: {len(warnings)} doxygen warning(s):')
        for w in warnings:
            print('  ' + w)
    for line in stray:
        print('doxygen: ' + line)
    if run.returncode != 0 and not per_file and not stray:
        print(f'doxygen exited with {run.returncode}:\n{run.stdout}')
        return 1
    return 1 if per_file or stray else 0


if __name__ == '__main__':
    sys.exit(main())
