// Attention pipelines for Python: a preset with stages changed (attention::set_stage, the CLI's
// --set), run by attention::forward on Q, K, V of [heads, tokens, dim] or [batch, heads, tokens,
// dim], with every stage the result keeps.
#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "emulation/attention/compare.hpp"
#include "emulation/attention/pipeline.hpp"
#include "python_results.hpp"

namespace lowbit::python {

namespace {

// An input as the CLI reads a tensor file: float32, float16 or bfloat16 values, 3-D (batch 1) or 4-D.
Tensor4 tensor_of(const InArray& x, const std::string& element_name, const std::string& name) {
  const Element element = element_of(x, element_name, name);
  if (element.float64 || (element.format != formats::fp32 && element.format != formats::fp16 && element.format != formats::bf16))
    throw std::invalid_argument(name + ": attention takes float32, float16 or bfloat16 tensors, not " + element_name);
  if (x.ndim() != 3 && x.ndim() != 4)
    throw std::invalid_argument(name + ": expected [heads, tokens, dim] or [batch, heads, tokens, dim], not a " +
                                std::to_string(x.ndim()) + "-D array");
  const std::size_t skip = x.ndim() == 3 ? 1 : 0;
  const auto dim = [&](std::size_t i) { return i < skip ? 1 : int(x.shape(i - skip)); };
  Tensor4 t(dim(0), dim(1), dim(2), dim(3));
  t.values = to_float32(x, element, name);
  return t;
}

nb::list heads_to_list(const std::vector<attention::QuantizedHead>& heads) {
  nb::list out;
  for (const auto& h : heads) {
    nb::dict d = quantized_to_dict(h.tensor);
    d["mean"] = to_numpy(std::vector<float>(h.mean), {h.mean.size()});
    out.append(d);
  }
  return out;
}

using Floats = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;

// attention::compare_with_kernel on float32 arrays: the outputs [batch, heads, tokens, dim] (or without
// batch), the LSEs [batch, heads, tokens] (both empty: none).
nb::dict compare_outputs(const Floats& kernel, const Floats& emulated, const std::string& format, const Floats& kernel_lse,
                         const Floats& emulated_lse) {
  if (emulated.ndim() != 3 && emulated.ndim() != 4)
    throw std::invalid_argument("compare: the emulated output is [heads, tokens, dim] or [batch, heads, tokens, dim], not " +
                                std::to_string(emulated.ndim()) + "-D");
  const std::size_t skip = emulated.ndim() == 3 ? 1 : 0;
  const auto dim = [&](std::size_t i) { return i < skip ? 1 : int(emulated.shape(i - skip)); };
  const auto span = [](const Floats& a) { return std::span<const float>(a.data(), a.size()); };
  attention::KernelComparison c;
  {
    nb::gil_scoped_release release;
    c = attention::compare_with_kernel(format_from_string(format), dim(0), dim(1), dim(2), dim(3), span(kernel), span(emulated),
                                       span(kernel_lse), span(emulated_lse));
  }
  nb::dict d, ulps;
  d["compared"] = c.compared;
  d["differ"] = c.differ;
  d["lse_compared"] = c.lse_compared;
  d["lse_differ"] = c.lse_differ;
  for (const auto& [distance, count] : c.ulps) ulps[nb::int_(distance)] = count;
  d["ulps"] = ulps;
  if (c.first) {
    nb::dict f;
    f["batch"] = c.first->batch;
    f["head"] = c.first->head;
    f["row"] = c.first->row;
    f["column"] = c.first->column;
    f["kernel"] = c.first->kernel;
    f["emulated"] = c.first->emulated;
    f["row_lse_differs"] = c.first->row_lse_differs ? nb::object(nb::bool_(*c.first->row_lse_differs)) : nb::none();
    d["first"] = f;
  } else {
    d["first"] = nb::none();
  }
  return d;
}

nb::dict run_attention(const InArray& q, const std::string& q_element, const InArray& k, const std::string& k_element,
                       const InArray& v, const std::string& v_element, const std::string& preset,
                       const std::vector<std::string>& stages, bool causal, unsigned threads, bool keep_operands,
                       const std::vector<float>& descales, const std::vector<float>& key_means) {
  const Tensor4 tq = tensor_of(q, q_element, "q"), tk = tensor_of(k, k_element, "k"), tv = tensor_of(v, v_element, "v");
  attention::Pipeline pipeline = attention::preset(preset, tq.dim);
  attention::follow_inputs(pipeline, format_from_string(q_element));  // the inputs' format (Q's), as the CLI
  for (const auto& s : stages)
    if (auto why = attention::set_stage(pipeline, s)) throw std::invalid_argument(*why);  // it names the stage
  if (auto why = pipeline.validate(tq.dim, tv.dim))
    throw std::invalid_argument("preset " + preset + " with these stages cannot run on head dimension " +
                                std::to_string(tq.dim) + ": " + *why);
  attention::ForwardResult r;
  {
    nb::gil_scoped_release release;
    r = attention::forward(pipeline, tq, tk, tv,
                           {.causal = causal, .threads = threads, .keep_operands = keep_operands, .q_name = "q", .k_name = "k",
                            .v_name = "v", .descales = descales, .key_means = key_means, .key_means_name = "key_mean"});
  }
  const bool three = q.ndim() == 3;
  const auto shape = [&](std::vector<std::size_t> s) {
    if (three) s.erase(s.begin());
    return s;
  };
  const std::size_t b = r.batch, h = r.heads, t = r.tokens, dv = r.value_dim;
  nb::dict d;
  d["output"] = to_numpy(std::move(r.rounded_output().values), shape({b, h, t, dv}));
  d["output_codes"] = codes_to_numpy(r.output_format, r.output_codes, shape({b, h, t, dv}));
  d["output_format"] = format_name(r.output_format);
  d["output_unrounded"] = to_numpy(std::move(r.output), shape({b, h, t, dv}));
  d["lse"] = to_numpy(std::move(r.lse), shape({b, h, t}));
  d["q"] = heads_to_list(r.q);
  d["k"] = heads_to_list(r.k);
  d["v"] = heads_to_list(r.v);
  d["macs"] = r.macs;
  d["preset"] = pipeline.name;
  d["follows"] = pipeline.follows;
  d["stages"] = attention::stage_values(pipeline);
  return d;
}

}  // namespace

void register_attention(nb::module_& m) {
  m.def("presets", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : attention::preset_list()) out.emplace_back(p.name, p.summary);
    return out;
  });
  m.def("stage_list", [] {
    std::vector<std::vector<std::string>> out;
    for (const auto& s : attention::stage_list()) out.push_back({std::string(s.name), std::string(s.values), std::string(s.help)});
    return out;
  });
  m.def("compare", &compare_outputs, nb::arg("kernel"), nb::arg("emulated"), nb::arg("format"), nb::arg("kernel_lse"),
        nb::arg("emulated_lse"));
  m.def("attention", &run_attention, nb::arg("q"), nb::arg("q_element"), nb::arg("k"), nb::arg("k_element"), nb::arg("v"),
        nb::arg("v_element"), nb::arg("preset"), nb::arg("stages"), nb::arg("causal"), nb::arg("threads"),
        nb::arg("keep_operands"), nb::arg("descales"), nb::arg("key_means"));
}

}  // namespace lowbit::python
