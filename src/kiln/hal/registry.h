// The backend registry: devices by name (`kiln run --device=NAME`). Backends register themselves
// from src/kiln/backends (the kiln_backends library, linked by the tools and tests, never by the
// runtime), so that the runtime creates any device without depending on one.
//
// A DeviceDecorator wraps a created device in another that forwards to it (triage's fault
// injection wraps any backend: triage/fault_device.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/hal/device.h"

namespace kiln::hal {

using DeviceFactory = std::function<StatusOr<std::unique_ptr<Device>>(const DeviceOptions&)>;
using DeviceDecorator = std::function<StatusOr<std::unique_ptr<Device>>(std::unique_ptr<Device>)>;

// What a device's outputs are: results it computed, or placeholders (the null device, which
// computes nothing). Conformance checks (kiln test-suite) compare only computed results; of a
// placeholder device they check that it accepts or refuses each case cleanly.
enum class DeviceResults { kComputed, kPlaceholders };

// One physical device of a backend that has several ("vulkan:0"), for `kiln devices`.
struct DeviceInstance {
  std::string name;     // what --device takes: "vulkan:0"
  std::string summary;  // "llvmpipe (LLVM 15.0.6, 256 bits), CPU, Vulkan 1.3.230"
  bool usable = true;
  std::string unusable_reason;                                  // when !usable
  std::vector<std::pair<std::string, std::string>> properties;  // limits and features, in order
};
// Lists a backend's physical devices. Errors: the backend's driver is missing.
using DeviceLister = std::function<StatusOr<std::vector<DeviceInstance>>()>;

struct DeviceInfo {
  std::string name;     // what --device takes
  std::string summary;  // one line for help texts
  DeviceResults results = DeviceResults::kComputed;
  bool takes_index = false;     // accepts "NAME:INDEX" (DeviceOptions::index)
  DeviceLister list_instances;  // set for a backend that takes an index
};

// Registers a backend. Errors: an empty name, or one already registered. Thread-safe.
// A backend registered with `list_instances` has several physical devices: it is also created as
// "NAME:INDEX" (DeviceOptions::index), and `kiln devices` lists them; for the others an index is
// an error.
Status register_device(std::string name, std::string summary, DeviceFactory factory,
                       DeviceResults results = DeviceResults::kComputed,
                       DeviceLister list_instances = {});
// Every registered backend, by name.
std::vector<DeviceInfo> registered_devices();
// The registered backend `name` ("NAME", or "NAME:INDEX" for one that takes an index); nullopt
// when there is none.
std::optional<DeviceInfo> find_device(std::string_view name);
// "cpu, null": the names, sorted, for messages.
std::string device_names();
// Creates the backend `name` ("NAME" or "NAME:INDEX", which sets options.index). Errors: an
// unknown name (the message lists the available devices), an index for a backend that takes
// none, or the backend's own (bad options).
StatusOr<std::unique_ptr<Device>> create_device(std::string_view name,
                                                const DeviceOptions& options);
// create_device, then `decorate` (when set) on the result.
StatusOr<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options,
                                                const DeviceDecorator& decorate);

}  // namespace kiln::hal
