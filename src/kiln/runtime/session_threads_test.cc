// One Session shared by threads: concurrent runs at mixed batch sizes give, bit for bit, what the
// same call made alone gives, on the CPU and on the Vulkan device (with its validation layer,
// which also checks that no Vulkan object is used by two threads at once); a concurrent call runs
// on a run state of its own while sequential calls reuse one; sessions with different thread counts
// keep theirs, called in turn from one thread or at once from two, and every call leaves the
// caller's OpenMP team size as it was.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/session.h"
#include "kiln/tooling/comparator.h"
#include "tests/support/hal/team_sizes.h"
#include "tests/support/runtime/test_modules.h"
#include "tests/support/tensors.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::compile_batch_conv_module;
using ::kiln::testing::random_tensor;

// Before main: Vulkan devices the tests create have the validation layer.
const bool vulkan_validation_on = [] {
  setenv("KILN_VULKAN_VALIDATION", "1", 1);
  return true;
}();

std::unique_ptr<Session> open_session(std::shared_ptr<const module::ModuleContents> module,
                                      int threads, const std::string& device = "cpu") {
  SessionOptions options;
  options.threads = threads;
  options.device = device;
  // Always the full team: these tests check which team sizes the dispatches get, which the
  // adaptive policy would change on a busy machine (3 threads on 2 cores are one).
  options.team_policy = hal::TeamPolicy::kFull;
  auto session = Session::create(std::move(module), options);
  KILN_CHECK(session.ok());
  return std::move(session).value();
}

struct Case {
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;  // the outputs of the same call made alone
};

// What went wrong on one thread ("" when nothing did).
std::string check_outputs(const Case& c, const std::vector<Tensor>& got, const char* how) {
  if (got.size() != c.expected.size()) return fmt::format("{}: {} outputs", how, got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!bitwise_equal(got[i], c.expected[i])) {
      return fmt::format("{}: output {} at batch {} differs from the run made alone", how, i,
                         c.inputs[0].shape()[0]);
    }
  }
  return {};
}

class SessionThreadsOnDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(SessionThreadsOnDevice, EightThreadsShareOneSessionBitForBit) {
  auto session = open_session(compile_batch_conv_module(), 2, GetParam());
  // Each input run alone first, from this thread: the references.
  const std::vector<int64_t> batches = {1, 2, 3, 5};
  std::vector<Case> cases;
  for (size_t i = 0; i < 2 * batches.size(); ++i) {
    Case c;
    c.inputs = {
        random_tensor({batches[i % batches.size()], 3, 32, 32}, static_cast<uint32_t>(100 + i))};
    auto out = session->run(c.inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    c.expected = std::move(out).value();
    cases.push_back(std::move(c));
  }

  constexpr int kThreads = 8;
  // lavapipe, the Vulkan device of machines without a GPU, takes ~0.1 s per run with validation.
  const int kRunsPerThread = GetParam() == "cpu" ? 100 : 10;
  std::vector<std::string> failures(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int r = 0; r < kRunsPerThread && failures[t].empty(); ++r) {
        const Case& c = cases[(3 * t + r) % cases.size()];
        switch ((t + r) % 3) {
          case 0: {  // run()
            auto out = session->run(c.inputs);
            failures[t] = out.ok() ? check_outputs(c, *out, "run") : out.status().to_string();
            break;
          }
          case 1: {  // run_into() the caller's tensors
            std::vector<Tensor> out;
            for (const Tensor& e : c.expected)
              out.push_back(Tensor::create(e.dtype(), e.shape()).value());
            Status status = session->run_into(c.inputs, out);
            failures[t] = status.ok() ? check_outputs(c, out, "run_into") : status.to_string();
            break;
          }
          default: {  // run() with its bindings, then what the other calls may ask meanwhile
            Bindings bound;
            auto out = session->run(c.inputs, nullptr, &bound);
            failures[t] = out.ok() ? check_outputs(c, *out, "run") : out.status().to_string();
            auto described = session->describe_dispatches(bound);
            auto shapes = session->value_shapes(bound);
            if (!described.ok() || described->size() != session->module().dispatches.size() ||
                !shapes.ok() || session->plan_cache_stats().plans == 0) {
              failures[t] += " describe_dispatches, value_shapes or plan_cache_stats failed";
            }
            break;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(Devices, SessionThreadsOnDevice, ::testing::Values("cpu", "vulkan"));

// Stops a run after its first dispatch until the test lets it go.
class PausingObserver : public hal::RunObserver {
 public:
  Status after_dispatch(int32_t dispatch, double, std::span<const Tensor>) override {
    if (dispatch != 0) return ok_status();
    std::unique_lock lock(mutex_);
    paused_ = true;
    changed_.notify_all();
    if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return resumed_; })) {
      return internal_error("not resumed: the other call did not finish while this one ran");
    }
    return ok_status();
  }
  void wait_until_paused() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return paused_; });
  }
  void resume() {
    std::lock_guard lock(mutex_);
    resumed_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool paused_ = false;
  bool resumed_ = false;
};

TEST(SessionThreads, AConcurrentCallRunsOnItsOwnStateAndSequentialCallsReuseOne) {
  auto session = open_session(compile_batch_conv_module(), 1);
  const std::vector<Tensor> in = {random_tensor({2, 3, 32, 32}, 9)};
  auto alone = session->run(in);
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(session->run(in).ok());
  EXPECT_EQ(session->plan_cache_stats().misses, 1u) << "sequential calls share one plan";
  EXPECT_EQ(session->plan_cache_stats().hits, 2u);
  const size_t one_arena = session->arena_bytes();

  // A call paused inside its run holds its state; a second call meanwhile gets another one,
  // prepares its own plan there, and finishes without waiting for the first.
  PausingObserver pausing;
  StatusOr<std::vector<Tensor>> paused_result = internal_error("not run");
  std::thread first([&] { paused_result = session->run(in, &pausing); });
  pausing.wait_until_paused();
  auto second = session->run(in);
  pausing.resume();
  first.join();
  ASSERT_TRUE(paused_result.ok()) << paused_result.status().to_string();
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_TRUE(bitwise_equal((*paused_result)[1], (*alone)[1]));
  EXPECT_TRUE(bitwise_equal((*second)[1], (*alone)[1]));
  EXPECT_EQ(session->plan_cache_stats().misses, 2u) << "the second state prepared its own plan";
  EXPECT_EQ(session->plan_cache_stats().plans, 2u);
  EXPECT_EQ(session->arena_bytes(), 2 * one_arena) << "an arena per state";

  // Both states are idle again: a sequential call reuses one and prepares nothing.
  ASSERT_TRUE(session->run(in).ok());
  EXPECT_EQ(session->plan_cache_stats().misses, 2u);
  EXPECT_EQ(session->plan_cache_stats().plans, 2u);
}

// Runs `session` (made with `threads`) twice, observed and not, from a caller whose team size is
// `caller`; what went wrong, or "".
std::string check_threads(Session& session, int threads, int caller, const Case& c) {
  if (omp_get_max_threads() != caller) return "the caller's team size changed before the run";
  testing::TeamSizes teams;
  auto observed = session.run(c.inputs, &teams);
  if (!observed.ok()) return observed.status().to_string();
  if (omp_get_max_threads() != caller) {
    return fmt::format("an observed run of a {}-thread session left the caller {} threads, not {}",
                       threads, omp_get_max_threads(), caller);
  }
  int most = 0;
  for (int team : teams.sizes) {
    if (team != 1 && team != threads) {
      return fmt::format("a dispatch of a {}-thread session ran with {}", threads, team);
    }
    most = std::max(most, team);
  }
  if (most != threads) {
    return fmt::format("no dispatch of a {}-thread session ran with {} threads", threads, threads);
  }
  auto plain = session.run(c.inputs);
  if (!plain.ok()) return plain.status().to_string();
  if (omp_get_max_threads() != caller) {
    return fmt::format("a run of a {}-thread session left the caller {} threads, not {}", threads,
                       omp_get_max_threads(), caller);
  }
  return check_outputs(c, *plain, "run");
}

TEST(SessionThreads, SessionsKeepTheirThreadCountsAndTheCallersTeamSize) {
  auto module = compile_batch_conv_module();
  auto one = open_session(module, 1);
  auto three = open_session(module, 3);
  Case c1, c3;
  c1.inputs = c3.inputs = {random_tensor({1, 3, 32, 32}, 4)};
  c1.expected = one->run(c1.inputs).value();
  c3.expected = three->run(c3.inputs).value();

  const int saved = omp_get_max_threads();
  // In turn from one thread, whose own team size is neither session's.
  omp_set_num_threads(5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(check_threads(*one, 1, 5, c1), "") << "in turn, round " << i;
    EXPECT_EQ(check_threads(*three, 3, 5, c3), "") << "in turn, round " << i;
  }
  omp_set_num_threads(saved);

  // At once from two threads, each with a team size of its own.
  std::string failure_one, failure_three;
  std::latch start(2);
  std::thread a([&] {
    omp_set_num_threads(4);
    start.arrive_and_wait();
    for (int i = 0; i < 10 && failure_one.empty(); ++i) failure_one = check_threads(*one, 1, 4, c1);
  });
  std::thread b([&] {
    omp_set_num_threads(6);
    start.arrive_and_wait();
    for (int i = 0; i < 10 && failure_three.empty(); ++i)
      failure_three = check_threads(*three, 3, 6, c3);
  });
  a.join();
  b.join();
  EXPECT_EQ(failure_one, "") << "at once: the 1-thread session";
  EXPECT_EQ(failure_three, "") << "at once: the 3-thread session";
}

}  // namespace
}  // namespace kiln::runtime
