// Session::run_into and Session::output_shapes: outputs written into the caller's memory are, bit
// for bit, those run() returns; a wrong count, dtype or dims is an error naming the output, found
// before anything runs where the inputs decide the dims; dims that depend on data are known only
// after a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "kiln/hal/device.h"

#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"
#include "tests/support/runtime/test_modules.h"
#include "tests/support/tensors.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::compile_batch_conv_module;
using ::kiln::testing::compile_nonzero_module;
using ::kiln::testing::random_tensor;

std::unique_ptr<Session> open_session(std::shared_ptr<const module::ModuleContents> module) {
  SessionOptions options;
  options.threads = 1;
  auto session = Session::create(std::move(module), options);
  KILN_CHECK(session.ok());
  return std::move(session).value();
}

std::byte* bytes_of(float* p) { return reinterpret_cast<std::byte*>(p); }

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

TEST(SessionRunInto, WritesTheOutputsIntoCallerMemoryBitForBitAsRun) {
  auto session = open_session(compile_batch_conv_module());
  for (int64_t batch : {1, 3, 2}) {
    const std::vector<Tensor> in = {random_tensor({batch, 3, 32, 32}, 7 + batch)};
    auto expected = session->run(in);
    ASSERT_TRUE(expected.ok()) << expected.status().to_string();
    auto shapes = session->output_shapes(in);
    ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
    ASSERT_EQ(*shapes, (std::vector<ConcreteShape>{{batch, 8, 1, 1}, {batch, 8, 32, 32}}));
    // One block of caller memory holds both outputs between NaN guards; the first output starts
    // 4 bytes in: aligned to its element size only.
    const size_t n0 = static_cast<size_t>(batch) * 8, n1 = static_cast<size_t>(batch) * 8 * 32 * 32;
    std::vector<float> memory(1 + n0 + n1 + 1, kNan);
    std::vector<Tensor> out = {
        Tensor::borrow_mutable(DType::kF32, (*shapes)[0], bytes_of(&memory[1]), nullptr),
        Tensor::borrow_mutable(DType::kF32, (*shapes)[1], bytes_of(&memory[1 + n0]), nullptr)};
    Status status = session->run_into(in, out);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(out[0].data(), bytes_of(&memory[1])) << "written in place";
    EXPECT_EQ(out[1].data(), bytes_of(&memory[1 + n0])) << "written in place";
    EXPECT_TRUE(bitwise_equal(out[0], (*expected)[0])) << "batch " << batch;
    EXPECT_TRUE(bitwise_equal(out[1], (*expected)[1])) << "batch " << batch;
    EXPECT_TRUE(std::isnan(memory.front()) && std::isnan(memory.back())) << "nothing outside";
  }
}

// The CPU device, noting the host address of every value a run binds and every read back.
class RecordingQueue : public hal::Queue {
 public:
  explicit RecordingQueue(hal::Queue& inner) : inner_(inner) {}
  Status write(const hal::BufferRef& dst, std::span<const std::byte> src) override {
    return inner_.write(dst, src);
  }
  Status read(const hal::BufferRef& src, std::span<std::byte> dst) override {
    ++reads;
    return inner_.read(src, dst);
  }
  Status submit(hal::Executable& executable, const hal::RunArgs& args) override {
    for (const hal::BufferRef& ref : args.values) bound.push_back(ref.host_data());
    return inner_.submit(executable, args);
  }
  Status finish() override { return inner_.finish(); }

  std::vector<const std::byte*> bound;
  int reads = 0;

 private:
  hal::Queue& inner_;
};

class RecordingDevice : public hal::Device {
 public:
  explicit RecordingDevice(std::unique_ptr<hal::Device> inner)
      : inner_(std::move(inner)), queue_(inner_->queue()) {}
  std::string name() const override { return inner_->name(); }
  Status supports(const hal::DispatchSpec& dispatch,
                  std::span<const hal::ValueSpec> values) const override {
    return inner_->supports(dispatch, values);
  }
  StatusOr<std::unique_ptr<hal::Executable>> prepare(const hal::ProgramSpec& spec) override {
    return inner_->prepare(spec);
  }
  StatusOr<std::vector<int64_t>> data_sizes(const hal::DispatchSpec& dispatch,
                                            std::span<const Tensor> inputs) override {
    return inner_->data_sizes(dispatch, inputs);
  }
  hal::Allocator& allocator() override { return inner_->allocator(); }
  hal::Queue& queue() override { return queue_; }
  const RecordingQueue& recorded() const { return queue_; }

 private:
  std::unique_ptr<hal::Device> inner_;
  RecordingQueue queue_;
};

TEST(SessionRunInto, OnTheCpuTheCallersBytesAreTheRunsOutputBuffers) {
  RecordingDevice* device = nullptr;
  SessionOptions options;
  options.threads = 1;
  options.decorate_device =
      [&](std::unique_ptr<hal::Device> inner) -> StatusOr<std::unique_ptr<hal::Device>> {
    auto recording = std::make_unique<RecordingDevice>(std::move(inner));
    device = recording.get();
    return std::unique_ptr<hal::Device>(std::move(recording));
  };
  auto session = Session::create(compile_batch_conv_module(), options);
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  const std::vector<Tensor> in = {random_tensor({2, 3, 32, 32}, 21)};
  std::vector<float> memory(2 * 8 + 2 * 8 * 32 * 32, kNan);
  std::vector<Tensor> out = {
      Tensor::borrow_mutable(DType::kF32, {2, 8, 1, 1}, bytes_of(&memory[0]), nullptr),
      Tensor::borrow_mutable(DType::kF32, {2, 8, 32, 32}, bytes_of(&memory[16]), nullptr)};
  Status status = (*session)->run_into(in, out);
  ASSERT_TRUE(status.ok()) << status.to_string();
  ASSERT_NE(device, nullptr);
  const std::vector<const std::byte*>& bound = device->recorded().bound;
  for (const Tensor& t : out) {
    EXPECT_NE(std::find(bound.begin(), bound.end(), t.data()), bound.end())
        << "an output's bytes were not bound to the run";
  }
  EXPECT_EQ(device->recorded().reads, 0) << "nothing is copied back";
  EXPECT_FALSE(std::isnan(memory[0]));
}

TEST(SessionRunInto, TensorsFromCreateWorkToo) {
  auto session = open_session(compile_batch_conv_module());
  const std::vector<Tensor> in = {random_tensor({4, 3, 32, 32}, 3)};
  auto expected = session->run(in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  std::vector<Tensor> out = {Tensor::create(DType::kF32, {4, 8, 1, 1}).value(),
                             Tensor::create(DType::kF32, {4, 8, 32, 32}).value()};
  ASSERT_TRUE(session->run_into(in, out).ok());
  EXPECT_TRUE(bitwise_equal(out[0], (*expected)[0]));
  EXPECT_TRUE(bitwise_equal(out[1], (*expected)[1]));
}

// The error of run_into(in, out); fails the test when there is none.
std::string run_into_error(Session& session, const std::vector<Tensor>& in,
                           std::vector<Tensor> out) {
  Status status = session.run_into(in, out);
  EXPECT_FALSE(status.ok());
  return status.to_string();
}

TEST(SessionRunInto, AWrongCountDtypeOrDimsIsAnErrorNamingTheOutput) {
  auto session = open_session(compile_batch_conv_module());
  const std::vector<Tensor> in = {random_tensor({2, 3, 32, 32}, 5)};
  auto make = [](DType dtype, ConcreteShape shape) {
    return Tensor::create(dtype, std::move(shape)).value();
  };
  const Tensor pooled = make(DType::kF32, {2, 8, 1, 1});
  const Tensor features = make(DType::kF32, {2, 8, 32, 32});

  std::string error = run_into_error(*session, in, {pooled});
  EXPECT_NE(error.find("2 output(s) ('pooled', 'features'), got 1"), std::string::npos) << error;
  error = run_into_error(*session, in, {pooled, features, features});
  EXPECT_NE(error.find("got 3"), std::string::npos) << error;
  error = run_into_error(*session, in, {pooled, make(DType::kF32, {3, 8, 32, 32})});
  EXPECT_NE(error.find("output 1 'features': expected f32 [2,8,32,32]"), std::string::npos)
      << error;
  EXPECT_NE(error.find("got f32 [3,8,32,32]"), std::string::npos) << error;
  error = run_into_error(*session, in, {make(DType::kF64, {2, 8, 1, 1}), features});
  EXPECT_NE(error.find("output 0 'pooled': expected f32 [2,8,1,1]"), std::string::npos) << error;
  EXPECT_NE(error.find("got f64"), std::string::npos) << error;
  error = run_into_error(*session, in, {pooled, make(DType::kF32, {2, 8, 32})});
  EXPECT_NE(error.find("output 1 'features'"), std::string::npos) << error;
  error = run_into_error(
      *session, in,
      {Tensor::borrow_mutable(DType::kF32, {2, 8, 1, 1}, nullptr, nullptr), features});
  EXPECT_NE(error.find("output 0 'pooled': the tensor has no bytes"), std::string::npos) << error;
  // The inputs are checked first, as by run().
  error = run_into_error(*session, {random_tensor({2, 4, 32, 32}, 5)}, {pooled, features});
  EXPECT_NE(error.find("input 0 'x'"), std::string::npos) << error;

  // Dims the inputs decide are checked before anything runs: a good first output stays untouched.
  std::vector<float> memory(16, kNan);
  std::vector<Tensor> out = {
      Tensor::borrow_mutable(DType::kF32, {2, 8, 1, 1}, bytes_of(memory.data()), nullptr),
      make(DType::kF32, {2, 8, 16, 16})};
  EXPECT_FALSE(session->run_into(in, out).ok());
  for (float v : memory) EXPECT_TRUE(std::isnan(v)) << "written before the check";
  EXPECT_EQ(session->plan_cache_stats().misses, 0u) << "nothing was prepared";
}

TEST(SessionRunInto, OutputsWhoseDimsDependOnDataAreCheckedOnceKnown) {
  auto session = open_session(compile_nonzero_module());
  Tensor x = Tensor::create(DType::kF32, {6}).value();
  auto v = x.mutable_values<float>();
  for (int i = 0; i < 6; ++i) v[i] = i % 2 == 0 ? 1.f : -1.f;  // three positives
  const std::vector<Tensor> in = {x};

  auto shapes = session->output_shapes(in);
  ASSERT_FALSE(shapes.ok());
  const std::string error = shapes.status().to_string();
  EXPECT_NE(error.find("output 0 'doubled'"), std::string::npos) << error;
  EXPECT_NE(error.find("depend on data"), std::string::npos) << error;

  auto expected = session->run(in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  ASSERT_EQ((*expected)[0].shape(), (ConcreteShape{1, 3}));
  std::vector<Tensor> out = {Tensor::create(DType::kI64, {1, 3}).value(),
                             Tensor::create(DType::kBool, {6}).value()};
  Status status = session->run_into(in, out);
  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_TRUE(bitwise_equal(out[0], (*expected)[0]));
  EXPECT_TRUE(bitwise_equal(out[1], (*expected)[1]));

  std::vector<Tensor> wrong = {Tensor::create(DType::kI64, {1, 4}).value(),
                               Tensor::create(DType::kBool, {6}).value()};
  status = session->run_into(in, wrong);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.to_string().find("output 0 'doubled': expected i64 [1,3]"), std::string::npos)
      << status.to_string();
}

TEST(SessionOutputShapes, FollowTheInputsAndRefuseBadOnes) {
  auto session = open_session(compile_batch_conv_module());
  auto shapes = session->output_shapes(std::vector<Tensor>{random_tensor({5, 3, 32, 32}, 1)});
  ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
  EXPECT_EQ(*shapes, (std::vector<ConcreteShape>{{5, 8, 1, 1}, {5, 8, 32, 32}}));
  auto bad = session->output_shapes(std::vector<Tensor>{random_tensor({5, 3, 32, 31}, 1)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("input 0 'x' dim 3"), std::string::npos)
      << bad.status().to_string();
  EXPECT_EQ(session->plan_cache_stats().misses, 0u) << "output_shapes prepares nothing";
}

}  // namespace
}  // namespace kiln::runtime
