// The fixed 64-byte header of a module file (layout in module.h) and the rules that tie it to the
// rest of the file. Internal to the module library and its tests.
//
// A valid file (format version 2) is laid out exactly as
//   [0, 64)                    header
//   [64, 64 + M)               metadata: a size-prefixed flatbuffer (module.fbs) of M bytes
//   [64 + M, C)                zero padding, C = M + 64 rounded up to a multiple of 64
//   [C, C + S)                 constants segment, S a multiple of 64; file size is C + S
// so every header field is determined by the rest of the file and a damaged header is detected
// even when the checksum is not verified.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kiln/base/status.h"
#include "kiln/module/module.h"

namespace kiln::module {

inline constexpr size_t kHeaderSize = 64;
inline constexpr uint64_t kSegmentAlignment = 64;
// flatbuffers cannot address more than 2 GiB.
inline constexpr uint64_t kMaxMetadataSize = (uint64_t{1} << 31) - 1;
// Longest dim text (DimExpr::to_string) a module may hold. Real dims are far shorter; the limit
// bounds the work of parsing a hostile file.
inline constexpr size_t kMaxDimTextLength = 1024;

struct ModuleHeader {
  uint32_t version = kFormatVersion;
  uint32_t flags = 0;
  uint64_t metadata_offset = 0;
  uint64_t metadata_size = 0;
  uint64_t constants_offset = 0;
  uint64_t constants_size = 0;
  uint64_t checksum = 0;
};

// `value` rounded up to a multiple of kSegmentAlignment; the caller keeps value far from 2^64.
inline uint64_t align_to_segment(uint64_t value) {
  return (value + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
}

// The header's 64 bytes, little-endian, reserved bytes zero.
std::array<std::byte, kHeaderSize> encode_header(const ModuleHeader& header);

// Reads and checks the header of a file of `size` bytes at `data`: magic (kInvalidArgument "not
// a kiln module"), version (kFailedPrecondition), flags, reserved bytes and the layout above
// against the file size (kDataLoss). Does not verify the checksum.
StatusOr<ModuleHeader> decode_header(const std::byte* data, size_t size);

// xxHash64 (seed 0) of bytes [kHeaderSize, size) of a file of `size` >= kHeaderSize bytes.
uint64_t file_checksum(const std::byte* data, size_t size);

}  // namespace kiln::module
