#include "kiln/hal/cpu/weight_cache.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kiln/base/aligned_memory.h"
#include "kiln/hal/cpu/convert_step.h"
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
      auto reorder = [&](const dnnl_desc& from_desc, const std::byte* from_data,
                         const dnnl_desc& to_desc, std::byte* to_data) {
        dnnl::memory from(from_desc, engine, const_cast<std::byte*>(from_data));
        dnnl::memory to(to_desc, engine, to_data);
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
      };
      const auto from_type = source.data_type(), to_type = target.data_type();
      if (!ConvertStep::converts(from_type, to_type)) {
        reorder(source, constant.data(), target, data);
        return ok_status();
      }
      // kiln converts the data type (convert_step.h), oneDNN changes the layout in f32.
      if (to_type == dnnl::memory::data_type::f32) {
        const dnnl_desc wide = with_data_type(source, to_type);
        std::vector<std::byte> t(wide.get_size());
        convert_elements(from_type, constant.data(), to_type, t.data(),
                         source.get_size() / dnnl::memory::data_type_size(from_type));
        reorder(wide, t.data(), target, data);
      } else {
        const dnnl_desc wide = with_data_type(target, from_type);
        std::vector<std::byte> t(wide.get_size());
        reorder(source, constant.data(), wide, t.data());
        convert_elements(from_type, t.data(), to_type, data,
                         wide.get_size() / dnnl::memory::data_type_size(from_type));
      }
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
      static_cast<std::byte*>(allocate_aligned_memory(bytes)), &std::free);
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
