// A guard for the tests of elementwise code generation: turns it on and
// restores the process's setting when the scope ends.
#pragma once

#include <ms/kernels/elementwise.hpp>

namespace ms::test {

struct CodegenGuard {
  bool saved = kernels::set_ew_codegen(true);
  ~CodegenGuard() { kernels::set_ew_codegen(saved); }
};

}  // namespace ms::test
