#include "kiln/kernels/window_attributes.h"

namespace kiln::kernels {

StatusOr<ConvAttributes> read_conv_attributes(const Attributes& attributes,
                                              std::span<const int64_t> x,
                                              std::span<const int64_t> w) {
  if (x.size() < 3 || w.size() != x.size()) {
    return invalid_argument(
        "Conv needs X [N, C, spatial...] and W of the same rank, got ranks {} "
        "and {}",
        x.size(), w.size());
  }
  ConvAttributes a;
  KILN_ASSIGN_OR_RETURN(a.group, attributes.get_int("group", 1));
  if (a.group < 1) return invalid_argument("attribute 'group' must be >= 1, got {}", a.group);
  WindowOptions options;
  options.kernel_from_weights = std::vector<int64_t>(w.begin() + 2, w.end());
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, parse_window_geometry(attributes, x.size() - 2, options));
  KILN_ASSIGN_OR_RETURN(a.window, resolve_window(g, x.subspan(2)));
  KILN_ASSIGN_OR_RETURN(a.activation, read_fused_activation(attributes));
  return a;
}

StatusOr<PoolAttributes> read_pool_attributes(std::string_view op_type,
                                              const Attributes& attributes,
                                              std::span<const int64_t> x) {
  if (x.size() < 3) {
    return invalid_argument("{} needs X [N, C, spatial...], got rank {}", op_type, x.size());
  }
  const size_t r = x.size() - 2;
  PoolAttributes a;
  if (op_type == "GlobalMaxPool" || op_type == "GlobalAveragePool") {
    a.max = op_type == "GlobalMaxPool";
    a.window = ConcreteWindow{std::vector<int64_t>(x.begin() + 2, x.end()),
                              std::vector<int64_t>(r, 1),
                              std::vector<int64_t>(r, 1),
                              std::vector<int64_t>(r, 0),
                              std::vector<int64_t>(r, 0),
                              false};
    return a;
  }
  if (op_type != "MaxPool" && op_type != "AveragePool") {
    return internal_error("read_pool_attributes: '{}' is not a max or average pool", op_type);
  }
  a.max = op_type == "MaxPool";
  WindowOptions options;
  options.allow_ceil_mode = true;
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, parse_window_geometry(attributes, r, options));
  KILN_ASSIGN_OR_RETURN(a.window, resolve_window(g, x.subspan(2)));
  if (a.max) {
    KILN_ASSIGN_OR_RETURN(int64_t order, attributes.get_int("storage_order", 0));
    if (order != 0 && order != 1) {
      return invalid_argument("attribute 'storage_order' must be 0 or 1, got {}", order);
    }
    a.column_major_indices = order == 1;
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t include, attributes.get_int("count_include_pad", 0));
    if (include != 0 && include != 1) {
      return invalid_argument("attribute 'count_include_pad' must be 0 or 1, got {}", include);
    }
    a.count_include_pad = include == 1;
  }
  return a;
}

}  // namespace kiln::kernels
