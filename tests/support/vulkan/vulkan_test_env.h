// For the Vulkan backend's tests: turns the Khronos validation layer on for the whole test
// process (before any Vulkan context exists), and makes the device under test: the Vulkan device
// with the CPU backend as its fallback. With KILN_TEST_SHADER_MUTANT=NAME in the environment, the
// shader NAME is replaced by its mutant (CMakeLists.txt) for the whole process. VulkanDeviceTest is
// the fixture the test files share: a fresh device per test, whose validation messages fail the
// test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/hal/vulkan/vulkan_context.h"
#include "kiln/hal/vulkan/vulkan_device.h"
#include "tests/support/hal/program.h"

namespace kiln::hal::vulkan::testing {

// The Vulkan device of DeviceOptions (validation on); the test fails when there is none.
std::unique_ptr<Device> make_vulkan_device(DeviceOptions options = {});

class VulkanDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = make_vulkan_device();
    ASSERT_NE(device_, nullptr);
  }
  void TearDown() override {
    if (device_ == nullptr) return;
    Status validation = vulkan().context().validation_status();
    EXPECT_TRUE(validation.ok()) << validation.to_string();
  }
  VulkanDevice& vulkan() { return static_cast<VulkanDevice&>(*device_); }

  // Prepares `s` and runs it on `inputs`; fails the test on an error.
  std::vector<Tensor> run(kiln::testing::SpecBuilder& s, const std::vector<Tensor>& inputs) {
    auto exe = device_->prepare(s.spec());
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    if (!exe.ok()) return {};
    auto out = kiln::testing::run_program(*device_, **exe, s.spec(), inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? std::move(*out) : std::vector<Tensor>{};
  }

  std::unique_ptr<Device> device_;
};

}  // namespace kiln::hal::vulkan::testing
