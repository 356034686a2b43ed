#!/usr/bin/env python3
"""scripts/check_function_length.py — no function in include/ or src/ over 80 lines.

Reads every C++ file (.hpp, .h, .cpp, .cc) under the given folders (default:
include/ and src/ of the repository), finds each function definition at
namespace or class scope (free functions, member functions, constructors,
operators; a lambda or local class inside a function counts as part of that
function) and prints `file:line: function 'name' is N lines (limit L)` for
every one longer than the limit. Exit status 1 when any is, 2 when a file
cannot be parsed (unbalanced braces), 0 otherwise.

A function's length runs from the first line of its declarator (after any
`template <...>` line) to its closing brace, both included.

    scripts/check_function_length.py                     # include/ and src/, limit 80
    scripts/check_function_length.py --limit 60 src/jit  # another limit or folder
    scripts/check_function_length.py --exclude src/ops/nn.cpp

The parser is a small tokenizer, not a compiler: it drops comments, string
and character literals (raw strings too) and preprocessor lines, then matches
braces. A `{` opens a function body when the text before it (since the last
`;`, `{` or `}` at that scope) is a declarator: it ends with `)` and optional
qualifiers (`const`, `noexcept`, `override`, `-> T`, `requires ...`) or with a
constructor's member-initializer list, and is not a control statement or an
initializer (`= [](...) {`). Only python3's standard library is used.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass

EXTENSIONS = (".hpp", ".h", ".cpp", ".cc")
CONTROL = {"if", "for", "while", "switch", "catch", "else", "do", "return", "try"}
SCOPE_KEYWORDS = {"namespace", "class", "struct", "union", "enum", "extern"}
TRAILING = re.compile(
    r"\)\s*((const|volatile|mutable|override|final|noexcept(\s*\([^()]*\))?|&&|&)\s*)*"
    r"(->.*|requires.*)?$",
    re.S,
)


@dataclass
class Function:
    name: str
    line: int  # first line of the declarator
    end: int  # line of the closing brace

    @property
    def length(self) -> int:
        return self.end - self.line + 1


class ParseError(Exception):
    pass


def strip_code(text: str) -> str:
    """Blanks comments, literals and preprocessor lines, keeping every newline."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor line, with its backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
            continue
        if c in " \t":
            out.append(c)
            i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'(?:u8|u|U|L)?R"([^()\\ ]{0,16})\(', text[i:i + 24])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def drop_template_prefix(header: str) -> str:
    """Removes leading `template <...>` clauses (angle brackets matched)."""
    while True:
        m = re.match(r"\s*template\s*<", header)
        if not m:
            return header
        depth, i = 1, m.end()
        while i < len(header) and depth:
            depth += {"<": 1, ">": -1}.get(header[i], 0)
            i += 1
        header = header[i:]


def top_level(header: str) -> str:
    """The header with every (...) group's contents removed: `f(int a = 1) const` -> `f() const`."""
    out, depth = [], 0
    for c in header:
        if c == "(":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def split_init_list(flat: str) -> str | None:
    """For a constructor `X::X() : a_(1), b_{2}` (flat: groups emptied) the part before ` : `."""
    m = re.search(r"\)\s*(noexcept\s*)?:(?!:)", flat)
    return flat[: m.start() + 1] if m else None


def classify(header: str) -> str:
    """'function', 'init' (a brace of a constructor's member-initializer list), or 'scope'."""
    body = drop_template_prefix(header).strip()
    if re.match(r"requires\b", body):  # a constrained class template: requires(...) struct X
        body = re.sub(r"^requires\s*(\([^;]*?\)|[\w:<>, ]+?)\s+(?=(struct|class)\b)", "", body)
    flat = top_level(body)
    words = re.findall(r"[A-Za-z_]\w*", flat)
    if not words or words[0] in CONTROL or words[0] in SCOPE_KEYWORDS:
        return "scope"
    if re.search(r"(?<![=!<>+\-*/%&|^])=(?!=)", re.sub(r"operator\s*\S+?\s*\(", "op(", flat)):
        return "scope"  # an initializer: `auto f = [] {`, `X x = {`
    init = split_init_list(flat)
    if init is not None:
        if re.search(r"[\w>]\s*$", flat):
            return "init"
        return "function"
    return "function" if TRAILING.search(flat) else "scope"


def function_name(header: str) -> str:
    flat = top_level(drop_template_prefix(header))
    init = split_init_list(flat)
    if init is not None:
        flat = init
    m = TRAILING.search(flat)
    before = flat[: m.start()] if m else flat
    before = before.rstrip()
    if before.endswith("("):
        before = before[:-1].rstrip()
    m = re.search(r"((?:[\w~]+\s*(?:<[^<>]*>)?\s*::\s*)*(?:operator\s*(?:\(\s*\)|[^\s\w(]+|\s\w[\w:<>* &]*)|~?\w+))\s*$", before)
    return re.sub(r"\s+", "", m.group(1)) if m else before.split()[-1] if before.split() else "?"


def find_functions(text: str) -> list[Function]:
    """The function definitions of a C++ source text (see the module comment)."""
    code = strip_code(text)
    functions: list[Function] = []
    stack: list[str] = []  # per open brace: 'scope', 'function', 'init', or 'inner'
    header_start = 0
    header_line = 1
    line = 1
    func_start_line = 0
    func_name = ""
    pending_init = False  # inside a constructor header, between its init-list braces
    parens = 0  # open '(' of the header being read (a `= {}` default argument is no block)
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
            continue
        inside_function = any(k == "function" for k in stack)
        if not inside_function and c in "()":
            parens += 1 if c == "(" else -1
        if c == "{":
            if inside_function or parens > 0:
                stack.append("inner")
                continue
            header = code[header_start:i]
            kind = classify(header)
            if kind == "init" or (pending_init and re.search(r"[\w>]\s*$", top_level(header))):
                stack.append("init")
                pending_init = True
                continue
            if kind == "function" or pending_init:
                stripped = drop_template_prefix(header)
                offset = len(header) - len(stripped.lstrip())
                func_start_line = header_line + header.count("\n", 0, offset)
                func_name = function_name(header)
                stack.append("function")
            else:
                stack.append("scope")
            pending_init = False
            header_start = i + 1
            header_line = line
        elif c == "}":
            if not stack:
                raise ParseError(f"line {line}: unmatched '}}'")
            kind = stack.pop()
            if kind == "function":
                functions.append(Function(func_name, func_start_line, line))
            if kind in ("init", "inner") or any(k == "function" for k in stack):
                continue
            parens = 0
            header_start = i + 1
            header_line = line
        elif c == ";" and not inside_function and not pending_init and parens == 0:
            header_start = i + 1
            header_line = line
        elif not c.isspace() and code[header_start:i].strip() == "":
            header_start = i
            header_line = line
    if stack:
        raise ParseError(f"{len(stack)} unclosed '{{' at end of file")
    return functions


def source_files(paths: list[str]) -> list[str]:
    files = []
    for p in paths:
        if os.path.isfile(p):
            files.append(p)
            continue
        for root, _, names in os.walk(p):
            files += [os.path.join(root, f) for f in names if f.endswith(EXTENSIONS)]
    return sorted(files)


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", help="files or folders (default: include/ and src/)")
    ap.add_argument("--limit", type=int, default=80, help="longest allowed function, in lines")
    ap.add_argument("--exclude", action="append", default=[], help="a file to skip (repeatable)")
    args = ap.parse_args(argv)
    paths = args.paths or [os.path.join(repo, "include"), os.path.join(repo, "src")]
    excluded = {os.path.realpath(os.path.join(repo, e) if not os.path.isabs(e) else e)
                for e in args.exclude}
    status = 0
    for path in source_files(paths):
        if os.path.realpath(path) in excluded:
            continue
        shown = os.path.relpath(path, repo) if path.startswith(repo) else path
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            functions = find_functions(text)
        except ParseError as e:
            print(f"{shown}: cannot parse: {e}", file=sys.stderr)
            status = 2
            continue
        for fn in functions:
            if fn.length > args.limit:
                print(f"{shown}:{fn.line}: function '{fn.name}' is {fn.length} lines "
                      f"(limit {args.limit})")
                status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
