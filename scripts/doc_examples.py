#!/usr/bin/env python3
"""Writes one C++ file that compiles every `Example:` code span of the given
headers, so that an example in a `///` comment names real API with the right
arguments. Each example becomes the body of its own function; the names it uses
without declaring them (x, bytes, opt, ...) become that function's parameters,
typed by the table below (a name missing from it is an error naming the header
and line: add it). A span that ends with ';' is compiled as statements, any
other as an expression. Usage: doc_examples.py OUT.cpp HEADER...
The headers are given relative to include/ (as they are #included)."""
import pathlib
import re
import sys

# The type of each free name examples use (parameters of the generated functions).
FREE = {
    'x': 'ms::Tensor', 'w': 'ms::Tensor', 'b': 'ms::Tensor', 'y': 'ms::Tensor',
    't': 'ms::Tensor', 'g': 'ms::Tensor', 'logits': 'ms::Tensor', 'mask': 'ms::Tensor',
    'dist': 'ms::Tensor', 'labels': 'ms::Tensor', 'images': 'ms::Tensor',
    'img': 'ms::Tensor', 'pred': 'ms::Tensor', 'target': 'ms::Tensor', 'index': 'ms::Tensor',
    'ids': 'ms::Tensor', 'embedding': 'ms::Tensor', 'loss': 'ms::Tensor',
    'bytes': 'std::vector<std::uint8_t>', 'raw': 'std::vector<std::uint8_t>',
    'gz_bytes': 'std::vector<std::uint8_t>', 'cap': 'std::size_t', 'path': 'std::string',
    'dir': 'std::string', 'grads': 'std::vector<ms::Tensor>',
    'opt': 'ms::optim::Optimizer', 'loader': 'ms::data::DataLoader',
    'net': 'ms::nn::Dense', 'f': 'ms::io::SafetensorsFile',
    'step': 'std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)>',
    'parse': 'std::function<ms::Tensor(const std::vector<std::uint8_t>&)>',
    'reducer': 'ms::parallel::DistributedGradReducer',
    'fs': 'std::shared_ptr<ms::io::FileSystem>',
    'buf': 'std::shared_ptr<std::vector<float>>',
}
KEYWORDS = set('''auto const constexpr return for if else while true false nullptr new delete
    sizeof static_cast reinterpret_cast void int char bool float double long unsigned signed
    short this template typename using namespace struct class operator'''.split())


def spans(text):
    """(line, code) of each backtick span that follows 'Example:' in a /// comment."""
    lines = text.split('\n')
    out = []
    for i, line in enumerate(lines):
        m = re.search(r'///.*?Example:(.*)$', line)
        if not m:
            continue
        rest = m.group(1)
        if '`' not in rest and i + 1 < len(lines):  # the span is on the next line
            nxt = re.match(r'\s*///\s*(.*)$', lines[i + 1])
            rest = nxt.group(1) if nxt else ''
        c = re.match(r'\s*`([^`]+)`', rest)
        if c:
            out.append((i + 1, c.group(1)))
    return out


def strip_literals(code):
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
    return re.sub(r"'(\\.|[^'\\])*'", "''", code)


def free_names(code):
    """Identifiers used but not declared in `code` (a rough C++ reading)."""
    c = strip_literals(code)
    declared = set()
    # declarations: `Type name =`, `Type name(`, `Type name;`, `Type name[`, `Type name{`
    for m in re.finditer(r'(\w+|[>&])\s+&?(\w+)\s*(?=[=(;\[{:),])', c):
        if m.group(1) not in ('return', 'throw', 'else', 'case', 'new', 'delete'):
            declared.add(m.group(2))
    for m in re.finditer(r'\[\s*(\w+(?:\s*,\s*\w+)*)\s*\]\s*(?==|:)', c):  # structured bindings
        declared.update(x.strip() for x in m.group(1).split(','))
    names = []
    for m in re.finditer(r'(?<![\w.:>])(?<!->)([A-Za-z_]\w*)\b(?!\s*::)', c):
        n = m.group(1)
        if n in KEYWORDS or n in declared or n in names:
            continue
        prev = c[:m.start()].rstrip()
        if prev.endswith('.') or prev.endswith('::') or prev.endswith('->'):
            continue
        if re.match(r'\s*[<(]', c[m.end():]) and n not in FREE:
            names.append(n)  # an unqualified call: reported as not API
            continue
        names.append(n)
    return names


def main():
    out, headers = sys.argv[1], sys.argv[2:]
    include = pathlib.Path(__file__).resolve().parent.parent / 'include'
    body, errors, n = [], [], 0
    for h in headers:
        text = (include / h).read_text()
        for line, code in spans(text):
            free = free_names(code)
            unknown = [v for v in free if v not in FREE]
            if unknown:
                errors.append(f'include/{h}:{line}: example `{code}` uses {", ".join(unknown)}: '
                              'qualify API names (ms::...) or add the variable to FREE in '
                              'scripts/doc_examples.py')
                continue
            params = ', '.join(f'{FREE[v]}& {v}' for v in free)
            stmt = code if code.rstrip().endswith(';') or code.rstrip().endswith('}') \
                else f'(void)({code});'
            n += 1
            body.append(f'// include/{h}:{line}\n[[maybe_unused]] auto example_{n}({params}) {{\n'
                        f'  {stmt}\n}}\n')
    if errors:
        print('\n'.join(errors), file=sys.stderr)
        return 1
    head = ['// Generated by scripts/doc_examples.py from the Example: spans of the headers',
            '// below; it only has to compile.', '#include <cstdint>', '#include <functional>',
            '#include <string>', '#include <vector>']
    head += [f'#include <{h}>' for h in headers]
    head += ['', '// Examples may declare what they do not use.',
             '#pragma GCC diagnostic ignored "-Wunused-variable"',
             '#pragma GCC diagnostic ignored "-Wunused-but-set-variable"', '', 'namespace {', '']
    tail = ['}  // namespace', '', f'int main() {{ return {n} > 0 ? 0 : 1; }}', '']
    pathlib.Path(out).write_text('\n'.join(head) + '\n'.join(body) + '\n'.join(tail))
    return 0


if __name__ == '__main__':
    sys.exit(main())
