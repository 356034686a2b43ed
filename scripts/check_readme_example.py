#!/usr/bin/env python3
"""Checks that a source file appears verbatim as a fenced code block of a
Markdown file (the README shows examples/onnx_run.cpp whole, so the program
shown is the one that is built and tested). Usage: check_readme_example.py
MARKDOWN SOURCE. Exit 1, naming both files, when no block holds the file's
exact text."""
import pathlib
import re
import sys


def main():
    md, src = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    text = src.read_text()
    blocks = re.findall(r'^```[\w+-]*\n(.*?)^```$', md.read_text(), re.S | re.M)
    if any(b == text for b in blocks):
        return 0
    print(f'{md}: no fenced code block holds the text of {src} verbatim; copy the file into it',
          file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
