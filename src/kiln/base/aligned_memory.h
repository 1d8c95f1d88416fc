// Host memory for kiln's buffers (tensors, runtime buffers, packed weights): aligned, and for big
// blocks backed by transparent huge pages where the kernel offers them on request
// (transparent_hugepage=madvise, Debian's default). A first touch of fresh memory faults one page
// at a time; with 4 KiB pages that cost more than the copy itself when kiln copies a model's
// weights (in a virtual machine, a 440 MB model's compile spent two thirds of its time faulting).
// Huge pages take 512 times fewer faults and fewer TLB misses for the kernels reading them.
#pragma once

#include <cstddef>

namespace kiln {

// Blocks of at least this many bytes start on a 2 MiB boundary and are marked MADV_HUGEPAGE.
inline constexpr size_t kHugePageThreshold = size_t{4} << 20;

// `bytes`, rounded up to a multiple of `alignment` (a power of two, at least sizeof(void*); 0
// bytes give one alignment unit), aligned to it, and to 2 MiB from kHugePageThreshold on. The
// contents are unspecified. Free with std::free. Null when the memory cannot be had.
void* allocate_aligned_memory(size_t bytes, size_t alignment = 64);

}  // namespace kiln
