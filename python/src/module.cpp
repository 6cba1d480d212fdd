// lowbit._core: the C++ core as a Python module (nanobind). Errors of the core
// (std::invalid_argument and its kind) reach Python as ValueError with the core's message.
#include "bindings.hpp"

NB_MODULE(_core, m) {
  m.doc() = "lowbit's C++ core (use the lowbit package, which wraps it)";
  lowbit::python::register_formats(m);
  lowbit::python::register_mma(m);
  lowbit::python::register_quantize(m);
  lowbit::python::register_attention(m);
  lowbit::python::register_run(m);
}
