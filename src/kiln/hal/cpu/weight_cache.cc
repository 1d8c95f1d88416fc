#include "kiln/hal/cpu/weight_cache.h"

#include <algorithm>
#include <cstdlib>

#include "kiln/hal/cpu/dnnl_util.h"

namespace kiln::hal::cpu {

ReorderedConstant::ReorderedConstant(Tensor source, dnnl::memory::desc layout, std::byte* data)
    : source_(std::move(source)), layout_(std::move(layout)), data_(data) {}

ReorderedConstant::~ReorderedConstant() { std::free(data_); }

StatusOr<std::shared_ptr<const ReorderedConstant>> WeightCache::get(
    const Tensor& constant, const dnnl::memory::desc& source, const dnnl::memory::desc& target,
    const dnnl::engine& engine) {
  return find_or_make(constant, source, target, [&](std::byte* data) {
    return catch_dnnl("reordering a constant", [&]() -> Status {
      dnnl::stream stream(engine);
      dnnl::memory from(source, engine, const_cast<std::byte*>(constant.data()));
      dnnl::memory to(target, engine, data);
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
      return ok_status();
    });
  });
}

StatusOr<std::shared_ptr<const ReorderedConstant>> WeightCache::get_transformed(
    const Tensor& constant, const dnnl::memory::desc& source, const dnnl::memory::desc& target,
    const Transform& transform) {
  return find_or_make(constant, source, target, [&](std::byte* data) {
    transform(constant.data(), data);
    return ok_status();
  });
}

StatusOr<std::shared_ptr<const ReorderedConstant>> WeightCache::find_or_make(
    const Tensor& constant, const dnnl::memory::desc& source, const dnnl::memory::desc& target,
    const std::function<Status(std::byte* target)>& fill) {
  if (source.get_size() != constant.byte_size()) {
    return internal_error("constant of {} bytes viewed as {}", constant.byte_size(),
                          describe(source));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(entries_, [](const Entry& e) { return e.value.expired(); });
  for (const Entry& e : entries_) {
    if (e.data == constant.data() && e.source == source && e.target == target) {
      if (auto value = e.value.lock()) return value;
    }
  }
  const size_t bytes = std::max<size_t>(64, (target.get_size() + 63) / 64 * 64);
  std::unique_ptr<std::byte, decltype(&std::free)> owned(
      static_cast<std::byte*>(std::aligned_alloc(64, bytes)), &std::free);
  if (owned == nullptr) {
    return out_of_range("cannot allocate {} bytes for reordered weights", bytes);
  }
  std::byte* data = owned.get();
  auto value = std::make_shared<const ReorderedConstant>(constant, target, owned.release());
  KILN_RETURN_IF_ERROR(fill(data));
  // The plain bytes are not needed while this copy lives: a mapped module's pages may go.
  constant.release_resident();
  entries_.push_back(Entry{constant.data(), source, target, value});
  return std::shared_ptr<const ReorderedConstant>(value);
}

size_t WeightCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(),
                                           [](const Entry& e) { return !e.value.expired(); }));
}

}  // namespace kiln::hal::cpu
