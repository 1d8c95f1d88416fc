// The device-neutral HAL's own parts: host buffers and their memory types, the synchronous
// queue's transfers and bounds, the registry (unknown names list the devices), and host tensors
// bound in place or copied through device buffers (a device that cannot address host memory).
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/hal/device.h"
#include "kiln/hal/host_allocator.h"
#include "kiln/hal/host_tensors.h"
#include "kiln/hal/registry.h"
#include "kiln/hal/sync_queue.h"

namespace kiln::hal {
namespace {

TEST(TeamPolicy, ParsesEachNameItGivesAndRefusesOthersNamingTheChoices) {
  for (TeamPolicy policy : {TeamPolicy::kAdaptive, TeamPolicy::kFull, TeamPolicy::kOneThread}) {
    auto parsed = parse_team_policy(team_policy_name(policy));
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(*parsed, policy);
  }
  auto bad = parse_team_policy("solo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("'solo'"), std::string::npos);
  EXPECT_NE(bad.status().to_string().find("adaptive, full or one-thread"), std::string::npos);
  EXPECT_FALSE(parse_team_policy("").ok());
}

TEST(HostAllocator, BuffersAreDeviceLocalHostVisibleAndAligned) {
  HostAllocator allocator;
  auto buffer = allocator.allocate(100, MemoryType::kDeviceLocal);
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  EXPECT_EQ((*buffer)->size(), 100u);
  EXPECT_TRUE(has_memory_type((*buffer)->memory_type(), MemoryType::kDeviceLocalHostVisible));
  ASSERT_NE((*buffer)->host_data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->host_data()) % 64, 0u);
  auto empty = allocator.allocate(0, MemoryType::kHostVisible);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size(), 0u);

  std::byte host[16];
  auto wrapped = allocator.wrap_host(host, sizeof(host));
  ASSERT_NE(wrapped, nullptr);
  EXPECT_EQ(wrapped->host_data(), host);  // in place: no copy
  EXPECT_EQ((BufferRef{wrapped.get(), 4}.host_data()), host + 4);
  EXPECT_EQ(BufferRef{}.host_data(), nullptr);
}

TEST(SyncQueue, CopiesInAndOutAndChecksBounds) {
  HostAllocator allocator;
  SyncQueue queue;
  auto buffer = allocator.allocate(8, MemoryType::kDeviceLocal).value();
  const int32_t in[2] = {7, -3};
  ASSERT_TRUE(queue.write({buffer.get(), 0}, std::as_bytes(std::span(in))).ok());
  int32_t out = 0;
  ASSERT_TRUE(queue.read({buffer.get(), 4}, std::as_writable_bytes(std::span(&out, 1))).ok());
  EXPECT_EQ(out, -3);
  Status past = queue.write({buffer.get(), 6}, std::as_bytes(std::span(in)));
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange);
  EXPECT_NE(past.message().find("exceed the 8-byte buffer"), std::string::npos) << past.message();
  EXPECT_FALSE(queue.read({}, std::as_writable_bytes(std::span(&out, 1))).ok());
  EXPECT_TRUE(queue.finish().ok());
}

TEST(Registry, CreatesByNameAndListsTheDevicesForAnUnknownOne) {
  static bool made = false;
  // Factories are plain functions of the options; this one fails on purpose.
  ASSERT_TRUE(register_device("hal_test_device", "a test's",
                              [](const DeviceOptions&) -> StatusOr<std::unique_ptr<Device>> {
                                made = true;
                                return unimplemented("hal_test_device makes no device");
                              })
                  .ok());
  EXPECT_FALSE(register_device("hal_test_device", "again", {}).ok());
  EXPECT_FALSE(register_device("", "nameless", {}).ok());
  auto created = create_device("hal_test_device", {});
  EXPECT_TRUE(made);
  EXPECT_EQ(created.status().code(), StatusCode::kUnimplemented);

  auto unknown = create_device("bogus", {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown device 'bogus': available devices: "),
            std::string::npos);
  EXPECT_NE(unknown.status().message().find("hal_test_device"), std::string::npos);
  bool listed = false;
  for (const DeviceInfo& info : registered_devices()) listed |= info.name == "hal_test_device";
  EXPECT_TRUE(listed);
}

// A backend registered with an instance lister takes "NAME:INDEX", which reaches its factory as
// DeviceOptions::index; one without refuses an index; a name cannot hold the separator.
TEST(Registry, IndexesReachOnlyBackendsWithSeveralDevices) {
  static std::string seen_index;
  auto factory = [](const DeviceOptions& options) -> StatusOr<std::unique_ptr<Device>> {
    seen_index = options.index;
    return unimplemented("makes no device");
  };
  auto lister = []() -> StatusOr<std::vector<DeviceInstance>> {
    return std::vector<DeviceInstance>{{"hal_test_gpu:0", "the only one"}};
  };
  ASSERT_TRUE(
      register_device("hal_test_gpu", "several", factory, DeviceResults::kComputed, lister).ok());
  ASSERT_TRUE(register_device("hal_test_single", "one", factory).ok());
  EXPECT_FALSE(register_device("hal_test:bad", "colon", factory).ok());

  EXPECT_EQ(create_device("hal_test_gpu:3", {}).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(seen_index, "3");
  EXPECT_EQ(create_device("hal_test_gpu", {}).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(seen_index, "");
  auto refused = create_device("hal_test_single:1", {});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("does not take"), std::string::npos)
      << refused.status().message();

  ASSERT_TRUE(find_device("hal_test_gpu:0").has_value());
  EXPECT_TRUE(find_device("hal_test_gpu:0")->takes_index);
  EXPECT_FALSE(find_device("hal_test_single:0").has_value());
  EXPECT_TRUE(find_device("hal_test_single").has_value());
  auto instances = find_device("hal_test_gpu")->list_instances();
  ASSERT_TRUE(instances.ok());
  EXPECT_EQ(instances->front().name, "hal_test_gpu:0");
}

// A device whose memory the host cannot see: every transfer must go through its queue.
class OpaqueBuffer : public Buffer {
 public:
  explicit OpaqueBuffer(size_t size)
      : Buffer(size, MemoryType::kDeviceLocal, nullptr), bytes(size) {}
  std::vector<std::byte> bytes;
};

class OpaqueAllocator : public Allocator {
 public:
  StatusOr<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryType wanted) override {
    if (has_memory_type(wanted, MemoryType::kHostVisible))
      return invalid_argument("no host-visible memory");
    return std::unique_ptr<Buffer>(std::make_unique<OpaqueBuffer>(bytes));
  }
};

class OpaqueQueue : public Queue {
 public:
  Status write(const BufferRef& dst, std::span<const std::byte> src) override {
    auto& b = static_cast<OpaqueBuffer&>(*dst.buffer).bytes;
    std::memcpy(b.data() + dst.offset, src.data(), src.size());
    ++writes;
    return ok_status();
  }
  Status read(const BufferRef& src, std::span<std::byte> dst) override {
    pending.emplace_back(src, dst);
    return ok_status();
  }
  Status submit(Executable& executable, const RunArgs& args) override {
    return executable.run(args);
  }
  // Reads complete only at the fence.
  Status finish() override {
    for (auto& [src, dst] : pending) {
      auto& b = static_cast<OpaqueBuffer&>(*src.buffer).bytes;
      std::memcpy(dst.data(), b.data() + src.offset, dst.size());
    }
    pending.clear();
    ++fences;
    return ok_status();
  }
  int writes = 0, fences = 0;
  std::vector<std::pair<BufferRef, std::span<std::byte>>> pending;
};

// out = in + 1 over f32, on opaque buffers.
class PlusOne : public Executable {
 public:
  size_t storage_bytes(int32_t) const override { return 0; }
  Status run(const RunArgs& args) override {
    auto& in = static_cast<OpaqueBuffer&>(*args.values[0].buffer).bytes;
    auto& out = static_cast<OpaqueBuffer&>(*args.values[1].buffer).bytes;
    for (size_t i = 0; i + 4 <= in.size(); i += 4) {
      float x;
      std::memcpy(&x, in.data() + i, 4);
      x += 1;
      std::memcpy(out.data() + i, &x, 4);
    }
    return ok_status();
  }
};

class OpaqueDevice : public Device {
 public:
  std::string name() const override { return "opaque"; }
  Status supports(const DispatchSpec&, std::span<const ValueSpec>) const override {
    return ok_status();
  }
  StatusOr<std::unique_ptr<Executable>> prepare(const ProgramSpec&) override {
    return std::unique_ptr<Executable>(std::make_unique<PlusOne>());
  }
  StatusOr<std::vector<int64_t>> data_sizes(const DispatchSpec&, std::span<const Tensor>) override {
    return unimplemented("none");
  }
  Allocator& allocator() override { return allocator_; }
  Queue& queue() override { return queue_; }
  OpaqueAllocator allocator_;
  OpaqueQueue queue_;
};

TEST(HostTensors, CopiedThroughDeviceBuffersWhenTheDeviceCannotAddressHostMemory) {
  ProgramSpec spec;
  spec.values = {{"x", DType::kF32, {3}, ValueRole::kInput, nullptr, {}},
                 {"y", DType::kF32, {3}, ValueRole::kOutput, nullptr, {}}};
  spec.dispatches = {{"plus", "PlusOne", nullptr, {0}, {1}, -1, {}, {}}};
  spec.inputs = {0};
  spec.outputs = {1};
  OpaqueDevice device;
  auto exe = device.prepare(spec).value();
  Tensor x = Tensor::create(DType::kF32, {3}).value();
  for (int i = 0; i < 3; ++i) x.mutable_values<float>()[i] = static_cast<float>(i);
  std::vector<Tensor> y = {Tensor::create(DType::kF32, {3}).value()};
  ASSERT_TRUE(run_on_host(device, *exe, spec, {&x, 1}, y).ok());
  EXPECT_EQ(device.queue_.writes, 1);
  EXPECT_EQ(device.queue_.fences, 1);
  EXPECT_EQ(y[0].values<float>()[0], 1.0f);
  EXPECT_EQ(y[0].values<float>()[2], 3.0f);

  std::vector<Tensor> wrong = {Tensor::create(DType::kF32, {4}).value()};
  Status mismatch = run_on_host(device, *exe, spec, {&x, 1}, wrong);
  EXPECT_NE(mismatch.message().find("output 0 'y' must be f32 [3]"), std::string::npos)
      << mismatch.message();
}

}  // namespace
}  // namespace kiln::hal
