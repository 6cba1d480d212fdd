// Tensor quantization for Python: an operand stage of an attention pipeline (its format,
// granularity and the QK instruction the per-thread and per-warp groups come from) made into a
// quantizer spec by the pipeline (attention::Pipeline::quant_spec) and run by quant::quantize.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "emulation/attention/pipeline.hpp"
#include "emulation/quant/quantize.hpp"
#include "python_results.hpp"

namespace lowbit::python {

namespace {

nb::dict run_quantize(const InArray& x, const std::string& element_name, const std::string& role_name,
                      const std::string& operand, std::optional<std::string> instruction, const std::string& preset,
                      const std::vector<std::string>& stages) {
  if (x.ndim() != 2) throw std::invalid_argument("x: expected a 2-D array (tokens x dim), not " + std::to_string(x.ndim()) + "-D");
  if (role_name != "q" && role_name != "k" && role_name != "v")
    throw std::invalid_argument("role '" + role_name + "': expected q, k or v");
  const auto role = role_name == "q" ? attention::Role::q : role_name == "k" ? attention::Role::k : attention::Role::v;
  const Element element = element_of(x, element_name, "x");
  const int rows = int(x.shape(0)), cols = int(x.shape(1));
  attention::Pipeline pipeline = attention::preset(preset, cols);
  std::vector<std::string> all = stages;
  all.push_back(role_name + "=" + operand);
  if (instruction) all.push_back("qk=" + *instruction);
  for (const auto& s : all)
    if (auto why = attention::set_stage(pipeline, s)) throw std::invalid_argument(*why);  // it names the stage
  const attention::OperandStage& stage = role == attention::Role::q ? pipeline.q : role == attention::Role::k ? pipeline.k : pipeline.v;
  if (auto why = stage.validate(role)) throw std::invalid_argument(*why);
  const quant::QuantSpec spec = pipeline.quant_spec(role);
  const std::vector<float> values = to_float32(x, element, "x");
  quant::QuantizedTensor q;
  {
    nb::gil_scoped_release release;
    q = quant::quantize(MatrixView<float>(values.data(), rows, cols), spec, role_name);
  }
  nb::dict d = quantized_to_dict(q);
  d["instruction"] = pipeline.qk.has_instruction() ? nb::cast(pipeline.qk_instruction().atom.name.str()) : nb::none();
  return d;
}

}  // namespace

void register_quantize(nb::module_& m) {
  m.def("quantize", &run_quantize, nb::arg("x"), nb::arg("element"), nb::arg("role"), nb::arg("operand"),
        nb::arg("instruction").none(), nb::arg("preset"), nb::arg("stages"));
}

}  // namespace lowbit::python
