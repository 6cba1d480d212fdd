#include "python_results.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"

namespace lowbit::python {

nb::dict quantized_to_dict(const quant::QuantizedTensor& q) {
  const std::vector<std::size_t> padded{std::size_t(q.padded_rows), std::size_t(q.padded_cols)};
  std::vector<Code> codes(q.codes.data(), q.codes.data() + q.codes.size());
  std::vector<std::int32_t> groups(codes.size());
  for (int r = 0; r < q.padded_rows; ++r)
    for (int c = 0; c < q.padded_cols; ++c) groups[std::size_t(r) * q.padded_cols + c] = q.group_of(r, c);
  nb::dict d;
  d["codes"] = codes_to_numpy(q.spec.element, codes, padded);
  d["scale_codes"] = codes_to_numpy(q.spec.scale.format, q.scale_codes, {q.scale_codes.size()});
  d["scales"] = to_numpy(std::vector<float>(q.scales), {q.scales.size()});
  d["groups"] = to_numpy(std::move(groups), padded);
  d["outer_scales"] = to_numpy(std::vector<float>(q.outer_scales), {q.outer_scales.size()});
  d["shape"] = nb::make_tuple(q.rows, q.cols);
  d["padded_shape"] = nb::make_tuple(q.padded_rows, q.padded_cols);
  d["element"] = format_name(q.spec.element);
  d["scale_format"] = format_name(q.spec.scale.format);
  d["grouping"] = q.spec.grouping.name;
  nb::dict nonfinite;
  nonfinite["nan"] = q.nonfinite.nan_count;
  nonfinite["inf"] = q.nonfinite.inf_count;
  d["nonfinite"] = nonfinite;
  return d;
}

}  // namespace lowbit::python
