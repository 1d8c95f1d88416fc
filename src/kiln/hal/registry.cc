#include "kiln/hal/registry.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

namespace kiln::hal {
namespace {

struct Entry {
  std::string summary;
  DeviceFactory factory;
  DeviceResults results = DeviceResults::kComputed;
  DeviceLister list_instances;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Entry, std::less<>> entries;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

Status register_device(std::string name, std::string summary, DeviceFactory factory,
                       DeviceResults results, DeviceLister list_instances) {
  if (name.empty()) return invalid_argument("a device needs a name");
  if (name.find(':') != std::string::npos)
    return invalid_argument("device name '{}' has a ':', which separates an index", name);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto [it, inserted] = r.entries.emplace(
      name, Entry{std::move(summary), std::move(factory), results, std::move(list_instances)});
  if (!inserted) return invalid_argument("device '{}' is already registered", name);
  return ok_status();
}

std::vector<DeviceInfo> registered_devices() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<DeviceInfo> out;
  for (const auto& [name, entry] : r.entries)
    out.push_back({name, entry.summary, entry.results, static_cast<bool>(entry.list_instances),
                   entry.list_instances});
  return out;
}

std::optional<DeviceInfo> find_device(std::string_view name) {
  const size_t colon = name.find(':');
  for (DeviceInfo& info : registered_devices()) {
    if (info.name == name.substr(0, colon) && (colon == std::string_view::npos || info.takes_index))
      return std::move(info);
  }
  return std::nullopt;
}

std::string device_names() {
  std::vector<std::string> names;
  for (const DeviceInfo& info : registered_devices()) names.push_back(info.name);
  return names.empty() ? std::string("(none registered)")
                       : fmt::format("{}", fmt::join(names, ", "));
}

StatusOr<std::unique_ptr<Device>> create_device(std::string_view name,
                                                const DeviceOptions& options) {
  const size_t colon = name.find(':');
  const std::string_view base = name.substr(0, colon);
  DeviceFactory factory;
  bool takes_index = false;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.entries.find(base);
    if (it != r.entries.end()) {
      factory = it->second.factory;
      takes_index = static_cast<bool>(it->second.list_instances);
    }
  }
  if (!factory)
    return invalid_argument("unknown device '{}': available devices: {}", name, device_names());
  if (colon == std::string_view::npos) return factory(options);
  if (!takes_index) {
    return invalid_argument("device '{}' has one instance; '{}' names an index it does not take",
                            base, name);
  }
  DeviceOptions indexed = options;
  indexed.index = std::string(name.substr(colon + 1));
  return factory(indexed);
}

StatusOr<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options,
                                                const DeviceDecorator& decorate) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, create_device(name, options));
  if (!decorate) return device;
  return decorate(std::move(device));
}

}  // namespace kiln::hal
