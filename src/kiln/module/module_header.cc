#include "kiln/module/module_header.h"

#include <xxhash.h>

#include <cstring>

namespace kiln::module {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'M', 'O', 'D', '\0'};

// Byte-wise so the file stays little-endian whatever the host is.
void store_le(std::byte* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
uint64_t load_le(const std::byte* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

std::array<std::byte, kHeaderSize> encode_header(const ModuleHeader& header) {
  std::array<std::byte, kHeaderSize> out{};
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  store_le(out.data() + 8, header.version, 4);
  store_le(out.data() + 12, header.flags, 4);
  store_le(out.data() + 16, header.metadata_offset, 8);
  store_le(out.data() + 24, header.metadata_size, 8);
  store_le(out.data() + 32, header.constants_offset, 8);
  store_le(out.data() + 40, header.constants_size, 8);
  store_le(out.data() + 48, header.checksum, 8);
  return out;
}

StatusOr<ModuleHeader> decode_header(const std::byte* data, size_t size) {
  if (size == 0) return invalid_argument("not a kiln module: the file is empty");
  if (size < sizeof(kMagic) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) {
    return invalid_argument("not a kiln module: it does not start with \"KILNMOD\"");
  }
  if (size < 12) return data_loss("module file is truncated: {} bytes, inside the header", size);
  ModuleHeader header;
  header.version = static_cast<uint32_t>(load_le(data + 8, 4));
  // The version is checked before anything else so that a file from another kiln gets the
  // message that tells the user what to do, not a complaint about its layout.
  if (header.version != kFormatVersion) {
    return failed_precondition(
        "module format version {}, this kiln reads version {}; recompile the model", header.version,
        kFormatVersion);
  }
  if (size < kHeaderSize) {
    return data_loss("module file is truncated: {} bytes, shorter than the {}-byte header", size,
                     kHeaderSize);
  }
  header.flags = static_cast<uint32_t>(load_le(data + 12, 4));
  header.metadata_offset = load_le(data + 16, 8);
  header.metadata_size = load_le(data + 24, 8);
  header.constants_offset = load_le(data + 32, 8);
  header.constants_size = load_le(data + 40, 8);
  header.checksum = load_le(data + 48, 8);
  uint64_t reserved = load_le(data + 56, 8);

  if (header.flags != 0) {
    return data_loss("module header has unknown flags {:#x}: the file is damaged", header.flags);
  }
  if (reserved != 0)
    return data_loss("module header's reserved bytes are not zero: the file is damaged");
  if (header.metadata_offset != kHeaderSize) {
    return data_loss("module header gives metadata offset {}, expected {}: the file is damaged",
                     header.metadata_offset, kHeaderSize);
  }
  if (header.metadata_size < 8 || header.metadata_size > kMaxMetadataSize) {
    return data_loss("module header gives metadata size {}, not in [8, {}]: the file is damaged",
                     header.metadata_size, kMaxMetadataSize);
  }
  uint64_t expected_constants = align_to_segment(kHeaderSize + header.metadata_size);
  if (header.constants_offset != expected_constants) {
    return data_loss("module header gives constants offset {}, expected {}: the file is damaged",
                     header.constants_offset, expected_constants);
  }
  if (header.constants_size % kSegmentAlignment != 0) {
    return data_loss(
        "module header gives constants size {}, not a multiple of {}: the file is damaged",
        header.constants_size, kSegmentAlignment);
  }
  if (header.constants_size > UINT64_MAX - header.constants_offset) {
    return data_loss("module header sizes overflow: the file is damaged");
  }
  uint64_t expected_size = header.constants_offset + header.constants_size;
  if (expected_size > size) {
    return data_loss("module file is truncated: the header describes {} bytes, the file has {}",
                     expected_size, size);
  }
  if (expected_size < size) {
    return data_loss(
        "module file has {} bytes, more than the {} its header describes: the file is damaged",
        size, expected_size);
  }
  return header;
}

uint64_t file_checksum(const std::byte* data, size_t size) {
  return XXH64(data + kHeaderSize, size - kHeaderSize, 0);
}

}  // namespace kiln::module
