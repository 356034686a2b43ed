#!/usr/bin/env python3
"""Checks that ms's stages include one another one way only.

    check_includes.py [ROOT]      exit 0 when every include runs down, else 1 with one line per fault
    check_includes.py --self-test checks the checker on a small tree with one fault of each kind

Reads every `#include "ms/..."` in ROOT/include and ROOT/src (ROOT: the
repository, by default this script's parent folder), maps each file to its
stage (include/ms/<stage>/..., src/<stage>/...) and reports, as
`file:line: ...`:

- an upward include: a file of one stage including a header of a stage above it;
- a circular include: headers that include each other, directly or through others;
- a header of a stage's private `detail/` folder included by a public header of
  another stage (a stage's public headers reach other stages' internals only
  through those stages' public headers);
- a `detail/` header without the `#error` that refuses direct inclusion;
- a file of a folder that is no stage below (a new stage must be placed in STAGES).

The umbrella headers ms/ms.hpp and ms/cell.hpp sit above every stage.
The order is written here once; docs/architecture.md explains it.
"""

import re
import sys
from pathlib import Path

# Bottom to top. Stages on one line are one level: they may include each other
# (file-level cycles are still caught).
STAGES = [
    ["core"],  # dtypes, storage, tensors, shapes and symbolic dims, errors, random draws
    ["kernels"],  # how the CPU computes; the elementwise instruction set
    ["expr"],  # expression templates over the instruction set; the recording interface
    ["ops"],  # the op table, its entries and public functions
    ["ir"],
    ["dyn"],  # dynamic-shape specs and the auto-dynamic manager, over the IR
    ["jit"],  # ms::jit: tracing, cache, passes, executor; reads dyn's policy
    ["autodiff"],
    ["nn", "hooks"],
    ["io", "data", "train"],
    ["onnx"],
    ["parallel"],
]
# Faults known and owned elsewhere, each with the change that removes it:
# reported, not failed on; an entry that no longer occurs is a fault (remove it).
LEVEL = {stage: i for i, names in enumerate(STAGES) for stage in names}
UMBRELLAS = {"ms/ms.hpp", "ms/cell.hpp"}
TOP = len(STAGES)

INCLUDE = re.compile(r'^\s*#\s*include\s+"(ms/[^"]+)"')
SOURCES = {".hpp", ".h", ".cpp", ".cc", ".inl"}


def stage_of(root: Path, path: Path) -> str | None:
    """The stage of a file under include/ms/ or src/, "" for an umbrella header."""
    rel = path.relative_to(root).parts
    if rel[0] == "include":
        if "/".join(rel[1:]) in UMBRELLAS:
            return ""
        return rel[2] if len(rel) > 3 else None
    return rel[1] if len(rel) > 2 else None


def stage_of_header(name: str) -> str | None:
    """The stage of an included header named "ms/<stage>/...", "" for an umbrella."""
    if name in UMBRELLAS:
        return ""
    parts = name.split("/")
    return parts[1] if len(parts) > 2 else None


def level(stage: str) -> int:
    return TOP if stage == "" else LEVEL[stage]


def check(root: Path) -> list[str]:
    """The faults of the tree at `root`."""
    files = sorted(
        p
        for top in ("include", "src")
        for p in (root / top).rglob("*")
        if p.is_file() and p.suffix in SOURCES
    )
    faults: list[str] = []
    graph: dict[str, list[tuple[str, int]]] = {}  # header name -> (included header, line)

    for path in files:
        rel = path.relative_to(root).as_posix()
        stage = stage_of(root, path)
        if stage is None or (stage != "" and stage not in LEVEL):
            faults.append(f"{rel}:1: '{stage}' is no stage of scripts/check_includes.py's STAGES")
            continue
        is_header = rel.startswith("include/")
        name = rel[len("include/") :] if is_header else None
        is_detail = "/detail/" in rel
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if is_header and is_detail and not any(l.lstrip().startswith("#error") for l in text):
            faults.append(
                f"{rel}:1: private header without the #error that refuses direct inclusion"
            )
        edges = graph.setdefault(name, []) if name else None
        for n, line in enumerate(text, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            target_stage = stage_of_header(target)
            where = f"{rel}:{n}"
            if target_stage is None or (target_stage != "" and target_stage not in LEVEL):
                faults.append(f"{where}: includes {target}, of no known stage")
                continue
            if not (root / "include" / target).is_file():
                faults.append(f"{where}: includes {target}, which does not exist")
                continue
            if level(target_stage) > level(stage):
                faults.append(
                    f"{where}: upward include of {target}: stage '{stage or 'umbrella'}' "
                    f"includes stage '{target_stage or 'umbrella'}', which is above it"
                )
            if (
                "/detail/" in target
                and is_header
                and not is_detail
                and target_stage != stage
            ):
                faults.append(
                    f"{where}: public header of stage '{stage}' includes {target}, a private "
                    f"header of stage '{target_stage}' (include that stage's public header)"
                )
            if edges is not None:
                edges.append((target, n))

    # Circular includes among headers: depth-first search, each cycle reported once.
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(h: str) -> None:
        state[h] = 1
        stack.append(h)
        for target, n in graph.get(h, []):
            if state.get(target) == 1:
                cycle = stack[stack.index(target) :] + [target]
                faults.append(
                    f"include/{h}:{n}: circular include: " + " -> ".join(cycle)
                )
            elif state.get(target) is None:
                visit(target)
        stack.pop()
        state[h] = 2

    for h in sorted(graph):
        if state.get(h) is None:
            visit(h)

    return faults


def self_test() -> int:
    """Runs the checker on a tree with one fault of each kind and on a clean one."""
    import tempfile

    files = {
        "include/ms/core/a.hpp": '#include "ms/core/b.hpp"\n',
        "include/ms/core/b.hpp": '#include "ms/core/a.hpp"\n',  # circular
        "include/ms/core/c.hpp": '#include "ms/ops/d.hpp"\n',  # upward
        "include/ms/ops/d.hpp": '#include "ms/kernels/detail/e.hpp"\n',  # other stage's detail
        "include/ms/kernels/detail/e.hpp": "#pragma once\n",  # no #error
        "include/ms/kernels/f.hpp": '#include "ms/core/c.hpp"\n',  # fine
        "src/wrong/g.cpp": '#include "ms/core/c.hpp"\n',  # no stage
    }
    expected = [
        "include/ms/core/c.hpp:1: upward include of ms/ops/d.hpp",
        "include/ms/ops/d.hpp:1: public header of stage 'ops' includes ms/kernels/detail/e.hpp",
        "include/ms/kernels/detail/e.hpp:1: private header without the #error",
        "src/wrong/g.cpp:1: 'wrong' is no stage",
        "circular include: ms/core/a.hpp -> ms/core/b.hpp -> ms/core/a.hpp",
    ]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        faults = check(root)
        missing = [e for e in expected if not any(e in f for f in faults)]
        for m in missing:
            print(f"self-test: fault not reported: {m}")
        if len(faults) != len(expected):
            print(f"self-test: {len(faults)} faults reported, {len(expected)} expected:")
            print("\n".join(faults))
            return 1
        # Fixed: no cycle, includes run down, the private header is reached
        # through its stage's public header and refuses direct inclusion.
        for name in ("include/ms/core/b.hpp", "include/ms/core/c.hpp", "src/wrong/g.cpp"):
            (root / name).unlink()
        (root / "include/ms/core/a.hpp").write_text("#pragma once\n")
        (root / "include/ms/kernels/f.hpp").write_text('#include "ms/kernels/detail/e.hpp"\n')
        (root / "include/ms/ops/d.hpp").write_text('#include "ms/kernels/f.hpp"\n')
        (root / "include/ms/kernels/detail/e.hpp").write_text('#error "include ms/kernels/f.hpp"\n')
        clean = check(root)
        if clean:
            print("self-test: faults reported on a clean tree:\n" + "\n".join(clean))
            return 1
    print("check_includes: self-test passed")
    return 1 if missing else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    root = root.resolve()
    files = sorted(p for top in ("include", "src") for p in (root / top).rglob("*")
                   if p.is_file() and p.suffix in SOURCES)
    faults = check(root)
    for f in faults:
        print(f)
    if faults:
        order = " -> ".join("/".join(s) for s in STAGES)
        print(f"check_includes: {len(faults)} fault(s); stage order: {order}", file=sys.stderr)
        return 1
    print(f"check_includes: {len(files)} files, every include runs down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
