#!/usr/bin/env bash
# Compile-failure test: compiles one snippet that misuses ms's API and passes
# only when the compiler rejects it with the sentence on the snippet's
# `// expect:` line (so a static_assert cannot silently vanish or change).
#   compile_fail.sh SNIPPET COMPILER [FLAGS...]
set -u
snippet=$1
shift
expect=$(sed -n 's|^// expect: ||p' "$snippet")
if [ -z "$expect" ]; then
  echo "compile_fail.sh: $snippet has no '// expect: <sentence>' line"
  exit 2
fi
if out=$("$@" -fsyntax-only -x c++ "$snippet" 2>&1); then
  echo "compile_fail.sh: $snippet compiled, but it must be rejected with: $expect"
  exit 1
fi
if grep -qF -- "$expect" <<<"$out"; then
  exit 0
fi
echo "$out" | head -n 60
echo "compile_fail.sh: $snippet was rejected, but without the sentence: $expect"
exit 1
