#include "kiln/base/attributes.h"

namespace kiln {
namespace {

template <typename T>
StatusOr<T> get_as(const std::map<std::string, Attribute>& values, const std::string& name,
                   T fallback, const char* kind) {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  if (const T* value = std::get_if<T>(&it->second)) return *value;
  return invalid_argument("attribute '{}' must be {}", name, kind);
}

}  // namespace

StatusOr<int64_t> Attributes::get_int(const std::string& name, int64_t fallback) const {
  return get_as<int64_t>(values_, name, fallback, "an int");
}

StatusOr<double> Attributes::get_float(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it != values_.end()) {
    if (const int64_t* value = std::get_if<int64_t>(&it->second))
      return static_cast<double>(*value);
  }
  return get_as<double>(values_, name, fallback, "a float");
}

StatusOr<std::string> Attributes::get_string(const std::string& name, std::string fallback) const {
  return get_as<std::string>(values_, name, std::move(fallback), "a string");
}

StatusOr<std::vector<int64_t>> Attributes::get_ints(const std::string& name,
                                                    std::vector<int64_t> fallback) const {
  return get_as<std::vector<int64_t>>(values_, name, std::move(fallback), "a list of ints");
}

StatusOr<std::vector<double>> Attributes::get_floats(const std::string& name,
                                                     std::vector<double> fallback) const {
  return get_as<std::vector<double>>(values_, name, std::move(fallback), "a list of floats");
}

}  // namespace kiln
