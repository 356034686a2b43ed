#!/usr/bin/env python3
"""Tests of scripts/check_function_length.py's parser on small C++ texts."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "check_function_length.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

import check_function_length as cfl  # noqa: E402


def found(text):
    return [(f.name, f.line, f.length) for f in cfl.find_functions(text)]


class FindFunctions(unittest.TestCase):
    def test_free_and_member_functions(self):
        text = (
            "namespace ms {\n"           # 1
            "int f(int a) {\n"            # 2
            "  return a;\n"               # 3
            "}\n"                         # 4
            "struct S {\n"                # 5
            "  int g() const { return 1; }\n"  # 6
            "  S(int a) : a_(a), b_{a} {\n"    # 7
            "    if (a) { a_ = 2; }\n"    # 8
            "  }\n"                       # 9
            "  int a_, b_;\n"             # 10
            "};\n"                        # 11
            "}  // namespace ms\n")
        self.assertEqual(found(text), [("f", 2, 3), ("g", 6, 1), ("S", 7, 3)])

    def test_qualified_names_operators_and_templates(self):
        text = (
            "template <class T>\n"
            "auto A<T>::run(std::span<const T> x) noexcept -> int {\n"
            "  return 0;\n"
            "}\n"
            "bool operator==(const A& a, const A& b) { return true; }\n"
            "int X::operator()(int i) const { return i; }\n")
        self.assertEqual(found(text), [("A<T>::run", 2, 3), ("operator==", 5, 1),
                                       ("X::operator()", 6, 1)])

    def test_not_functions(self):
        text = (
            "namespace {\n"
            "enum class E : int { a, b };\n"
            "constexpr int t[] = {1, 2};\n"
            "auto lam = [](int x) {\n  return x;\n};\n"
            "template <class T> concept C = requires(const T& t) { t.f(); };\n"
            "struct O { std::function<void(int)> cb{}; };\n"
            "}\n")
        self.assertEqual(found(text), [])

    def test_braces_in_comments_strings_defaults_and_bodies(self):
        text = (
            "// a comment { with a brace\n"
            "void f(Opts o = {}, int k = {1}) {\n"
            "  const char* s = \"}\";\n"
            "  char c = '{';\n"
            "  auto r = R\"x(})x\";\n"
            "  /* } */\n"
            "  auto g = [&] { if (k) { return; } };\n"
            "}\n"
            "#define MS_X(a) { a }\n"
            "int h() { return 1'000; }\n")
        self.assertEqual(found(text), [("f", 2, 7), ("h", 10, 1)])

    def test_unbalanced_is_an_error(self):
        with self.assertRaises(cfl.ParseError):
            cfl.find_functions("void f() {\n")
        with self.assertRaises(cfl.ParseError):
            cfl.find_functions("}\n")


class CommandLine(unittest.TestCase):
    def run_on(self, text, *args):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.cpp")
            with open(path, "w") as f:
                f.write(text)
            return subprocess.run([sys.executable, SCRIPT, *args, d], capture_output=True,
                                  text=True)

    def test_names_file_line_and_function(self):
        long_fn = "void short_one() {}\n\nint too_long(int a) {\n" + "  ++a;\n" * 80 + "}\n"
        r = self.run_on(long_fn)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stdout, r"a\.cpp:3: function 'too_long' is 82 lines \(limit 80\)")
        self.assertNotIn("short_one", r.stdout)
        self.assertEqual(self.run_on(long_fn, "--limit", "82").returncode, 0)

    def test_parse_error_fails(self):
        r = self.run_on("void f() {\n")
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot parse", r.stderr)


if __name__ == "__main__":
    unittest.main()
