#include "ms/expr/recorder.hpp"

namespace ms::expr {

namespace {
thread_local Recorder* t_recorder = nullptr;
}  // namespace

Recorder* active_recorder() { return t_recorder; }

namespace detail {
Recorder* set_active_recorder(Recorder* r) {
  Recorder* prev = t_recorder;
  t_recorder = r;
  return prev;
}
}  // namespace detail

}  // namespace ms::expr
