// Queue: how work reaches a device. Transfers and runs are enqueued in order and may complete
// later (a GPU); finish() waits for everything enqueued so far and returns the first error. A
// device that completes on the calling thread (cpu, null) uses SyncQueue (sync_queue.h), where
// every call is done when it returns.
//
// Host memory passed to write() or read(), and the buffers and RunArgs of submit(), must stay
// valid until finish() returns. One queue per device, called by several threads at once when a
// Session runs concurrently (device.h): SyncQueue holds no state; an asynchronous queue must keep
// each calling thread's work and first error apart (e.g. a stream per thread).
#pragma once

#include <cstddef>
#include <span>

#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/executable.h"

namespace kiln::hal {

class Queue {
 public:
  virtual ~Queue() = default;
  // Copies host bytes into `dst` at `offset`. Errors: the range is outside the buffer.
  virtual Status write(const BufferRef& dst, std::span<const std::byte> src) = 0;
  // Copies bytes of `src` at `offset` to host memory. Errors as write().
  virtual Status read(const BufferRef& src, std::span<std::byte> dst) = 0;
  // Runs `executable` (prepared by this queue's device) on `args`. With an observer the run is
  // complete when submit returns.
  virtual Status submit(Executable& executable, const RunArgs& args) = 0;
  // The fence: waits until everything enqueued has finished; the first error among it.
  virtual Status finish() = 0;
};

}  // namespace kiln::hal
