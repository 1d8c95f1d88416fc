// SyncQueue: the queue of a device whose buffers are host-visible and whose executables run on the
// calling thread (cpu, null). write and read are memcpy; submit calls Executable::run; every call
// is complete when it returns, so finish() has nothing to wait for. It holds no state, so any
// number of threads may use it at once.
#pragma once

#include "kiln/hal/queue.h"

namespace kiln::hal {

class SyncQueue : public Queue {
 public:
  // Errors: a buffer that is not host-visible, a range outside the buffer.
  Status write(const BufferRef& dst, std::span<const std::byte> src) override;
  Status read(const BufferRef& src, std::span<std::byte> dst) override;
  Status submit(Executable& executable, const RunArgs& args) override;
  Status finish() override { return ok_status(); }
};

}  // namespace kiln::hal
