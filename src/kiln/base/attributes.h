// Node and dispatch attributes: the ONNX attribute kinds kiln keeps (int, float, string, and lists
// of ints, floats and strings). Tensor-valued attributes (Constant's `value`) become constants at
// import.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/base/status.h"

namespace kiln {

using Attribute = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

// Name -> value, ordered so that printing is deterministic.
class Attributes {
 public:
  void set(std::string name, Attribute value) { values_[std::move(name)] = std::move(value); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  void erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, Attribute>& all() const { return values_; }

  // Typed getters: the default when absent; an error naming the attribute when present with
  // another kind.
  StatusOr<int64_t> get_int(const std::string& name, int64_t fallback) const;
  StatusOr<double> get_float(const std::string& name, double fallback) const;
  StatusOr<std::string> get_string(const std::string& name, std::string fallback) const;
  StatusOr<std::vector<int64_t>> get_ints(const std::string& name,
                                          std::vector<int64_t> fallback) const;
  StatusOr<std::vector<double>> get_floats(const std::string& name,
                                           std::vector<double> fallback) const;

 private:
  std::map<std::string, Attribute> values_;
};

}  // namespace kiln
