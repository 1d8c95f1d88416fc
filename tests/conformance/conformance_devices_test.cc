// tests/conformance/CMakeLists.txt runs the conformance suite on every device it lists
// (KILN_CONFORMANCE_DEVICES); a backend registered without a run there would go untested.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/backends/builtin.h"
#include "kiln/hal/registry.h"

namespace kiln {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

TEST(ConformanceDevices, EveryRegisteredDeviceHasAConformanceRun) {
  backends::register_builtin_backends();
  std::vector<std::string> listed = split(KILN_CONFORMANCE_DEVICES);
  std::vector<std::string> registered;
  for (const hal::DeviceInfo& info : hal::registered_devices()) registered.push_back(info.name);
  std::sort(listed.begin(), listed.end());
  std::sort(registered.begin(), registered.end());
  ASSERT_FALSE(registered.empty());
  EXPECT_EQ(listed, registered)
      << "list every registered device in KILN_CONFORMANCE_DEVICES (tests/conformance/"
         "CMakeLists.txt) and add its expectations with tests/conformance/update.py";
}

}  // namespace
}  // namespace kiln
