// `kiln devices [--json]`: the devices this build can run on (what --device takes), and for a
// backend with several physical devices (vulkan) each of them with its limits.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "kiln/hal/registry.h"

namespace kiln::cli {
namespace {

using Json = nlohmann::ordered_json;

struct DevicesFlags {
  bool json = false;
};

Json instance_json(const hal::DeviceInstance& instance) {
  Json properties = Json::object();
  for (const auto& [key, value] : instance.properties) properties[key] = value;
  Json out{{"name", instance.name}, {"summary", instance.summary}, {"usable", instance.usable}};
  if (!instance.usable) out["unusable_reason"] = instance.unusable_reason;
  out["properties"] = std::move(properties);
  return out;
}

int run_devices(const DevicesFlags& flags) {
  Json devices = Json::array();
  for (const hal::DeviceInfo& info : hal::registered_devices()) {
    Json device{
        {"name", info.name},
        {"summary", info.summary},
        {"results", info.results == hal::DeviceResults::kComputed ? "computed" : "placeholders"}};
    if (info.list_instances) {
      StatusOr<std::vector<hal::DeviceInstance>> instances = info.list_instances();
      Json list = Json::array();
      if (instances.ok()) {
        for (const hal::DeviceInstance& instance : *instances)
          list.push_back(instance_json(instance));
      } else {
        device["error"] = instances.status().message();
      }
      device["instances"] = std::move(list);
    }
    devices.push_back(std::move(device));
  }
  if (flags.json) {
    std::printf("%s\n", Json{{"devices", devices}}.dump(2).c_str());
    return kExitOk;
  }
  for (const Json& device : devices) {
    std::printf("%-8s %s\n", device["name"].get<std::string>().c_str(),
                device["summary"].get<std::string>().c_str());
    if (device.contains("error")) {
      std::printf("         (none available: %s)\n", device["error"].get<std::string>().c_str());
    }
    if (!device.contains("instances")) continue;
    for (const Json& instance : device["instances"]) {
      std::printf(
          "  %s: %s%s\n", instance["name"].get<std::string>().c_str(),
          instance["summary"].get<std::string>().c_str(),
          instance["usable"].get<bool>()
              ? ""
              : (" (cannot run kiln: " + instance["unusable_reason"].get<std::string>() + ")")
                    .c_str());
      for (const auto& [key, value] : instance["properties"].items()) {
        std::printf("    %-32s %s\n", key.c_str(), value.get<std::string>().c_str());
      }
    }
  }
  return kExitOk;
}

}  // namespace

Command add_devices_command(CLI::App& app) {
  auto flags = std::make_shared<DevicesFlags>();
  CLI::App* sub = app.add_subcommand(
      "devices", "list the devices kiln can run on (--device=NAME), with each GPU's limits");
  sub->add_flag("--json", flags->json, "print JSON instead of text");
  return {sub, [flags] { return run_devices(*flags); }};
}

}  // namespace kiln::cli
