#include "kiln/hal/sync_queue.h"

#include <cstring>

namespace kiln::hal {
namespace {

StatusOr<std::byte*> host_range(const BufferRef& ref, size_t bytes, const char* what) {
  if (ref.buffer == nullptr) return invalid_argument("{}: no buffer", what);
  if (ref.buffer->host_data() == nullptr)
    return invalid_argument("{}: the buffer is not host-visible", what);
  if (ref.offset > ref.buffer->size() || bytes > ref.buffer->size() - ref.offset) {
    return out_of_range("{}: {} bytes at offset {} exceed the {}-byte buffer", what, bytes,
                        ref.offset, ref.buffer->size());
  }
  return ref.buffer->host_data() + ref.offset;
}

}  // namespace

Status SyncQueue::write(const BufferRef& dst, std::span<const std::byte> src) {
  KILN_ASSIGN_OR_RETURN(std::byte * to, host_range(dst, src.size(), "write"));
  if (!src.empty()) std::memcpy(to, src.data(), src.size());
  return ok_status();
}

Status SyncQueue::read(const BufferRef& src, std::span<std::byte> dst) {
  KILN_ASSIGN_OR_RETURN(std::byte * from, host_range(src, dst.size(), "read"));
  if (!dst.empty()) std::memcpy(dst.data(), from, dst.size());
  return ok_status();
}

Status SyncQueue::submit(Executable& executable, const RunArgs& args) {
  return executable.run(args);
}

}  // namespace kiln::hal
