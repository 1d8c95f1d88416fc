#include "kiln/onnx/in_place_weights.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::onnx_import {
namespace {

// Field numbers of onnx.proto.
constexpr uint32_t kModelGraph = 7;                 // ModelProto.graph
constexpr uint32_t kGraphInitializer = 5;           // GraphProto.initializer
constexpr uint32_t kTensorRawData = 9;              // TensorProto.raw_data
constexpr uint32_t kTensorExternalData = 13;        // TensorProto.external_data
constexpr uint32_t kTensorDataLocation = 14;        // TensorProto.data_location
constexpr uint32_t kEntryKey = 1, kEntryValue = 2;  // StringStringEntryProto
constexpr uint64_t kExternal = 1;                   // TensorProto.DataLocation.EXTERNAL

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

// One field of a message: its tag's position, and for length-delimited fields the payload.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  size_t begin = 0;    // first byte of the tag
  size_t end = 0;      // one past the field's last byte
  size_t payload = 0;  // first byte of a length-delimited payload
};

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, size_t begin, size_t end)
      : bytes_(bytes), at_(begin), end_(end) {}

  bool done() const { return at_ == end_; }

  // The next field; false on malformed data or a wire type the rewrite does not take.
  bool next(Field& f) {
    f.begin = at_;
    uint64_t tag = 0;
    if (!varint(tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) return false;
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire = static_cast<uint32_t>(tag & 7);
    uint64_t value = 0;
    switch (f.wire) {
      case kVarint:
        if (!varint(value)) return false;
        break;
      case kFixed64:
        if (end_ - at_ < 8) return false;
        at_ += 8;
        break;
      case kFixed32:
        if (end_ - at_ < 4) return false;
        at_ += 4;
        break;
      case kLength:
        if (!varint(value) || value > end_ - at_) return false;
        f.payload = at_;
        at_ += value;
        break;
      default: return false;  // groups: not in onnx.proto
    }
    f.end = at_;
    return true;
  }

 private:
  bool varint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ == end_) return false;
      const auto byte = static_cast<uint8_t>(bytes_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  std::span<const std::byte> bytes_;
  size_t at_, end_;
};

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_tag(std::string& out, uint32_t number, uint32_t wire) {
  put_varint(out, (uint64_t{number} << 3) | wire);
}

void put_bytes(std::string& out, uint32_t number, std::string_view bytes) {
  put_tag(out, number, kLength);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_copy(std::string& out, std::span<const std::byte> file, size_t begin, size_t end) {
  out.append(reinterpret_cast<const char*>(file.data()) + begin, end - begin);
}

// An external_data entry {key, value}.
std::string entry(std::string_view key, std::string_view value) {
  std::string e;
  put_bytes(e, kEntryKey, key);
  put_bytes(e, kEntryValue, value);
  return e;
}

struct Rewrite {
  std::span<const std::byte> file;
  const std::string& file_name;
  size_t min_bytes;
  int rewritten = 0;

  // A TensorProto at [begin, end): appends it to `out`, its raw_data replaced by a reference when
  // it is big enough. False when its bytes are not understood.
  bool tensor(size_t begin, size_t end, std::string& out) {
    Reader r(file, begin, end);
    Field f, raw;
    int raw_count = 0;
    bool external = false;
    while (!r.done()) {
      if (!r.next(f)) return false;
      if (f.number == kTensorRawData && f.wire == kLength) {
        raw = f;
        ++raw_count;
      }
      external = external || f.number == kTensorExternalData || f.number == kTensorDataLocation;
    }
    if (raw_count != 1 || external || raw.end - raw.payload <= min_bytes) {
      put_copy(out, file, begin, end);
      return true;
    }
    put_copy(out, file, begin, raw.begin);
    put_copy(out, file, raw.end, end);
    put_bytes(out, kTensorExternalData, entry("location", file_name));
    put_bytes(out, kTensorExternalData, entry("offset", std::to_string(raw.payload)));
    put_bytes(out, kTensorExternalData, entry("length", std::to_string(raw.end - raw.payload)));
    put_tag(out, kTensorDataLocation, kVarint);
    put_varint(out, kExternal);
    ++rewritten;
    return true;
  }

  // A GraphProto's payload at [begin, end), appended to `out` with its initializers rewritten.
  bool graph(size_t begin, size_t end, std::string& out) {
    Reader r(file, begin, end);
    Field f;
    while (!r.done()) {
      if (!r.next(f)) return false;
      if (f.number != kGraphInitializer || f.wire != kLength) {
        put_copy(out, file, f.begin, f.end);
        continue;
      }
      std::string t;
      if (!tensor(f.payload, f.end, t)) return false;
      put_bytes(out, kGraphInitializer, t);
    }
    return true;
  }

  bool model(std::string& out) {
    Reader r(file, 0, file.size());
    Field f;
    while (!r.done()) {
      if (!r.next(f)) return false;
      if (f.number != kModelGraph || f.wire != kLength) {
        put_copy(out, file, f.begin, f.end);
        continue;
      }
      std::string g;
      if (!graph(f.payload, f.end, g)) return false;
      put_bytes(out, kModelGraph, g);
    }
    return true;
  }
};

}  // namespace

std::optional<std::string> refer_to_weights_in_place(std::span<const std::byte> file,
                                                     const std::string& file_name,
                                                     size_t min_bytes) {
  Rewrite rewrite{file, file_name, min_bytes};
  std::string out;
  if (!rewrite.model(out) || rewrite.rewritten == 0) return std::nullopt;
  return out;
}

}  // namespace kiln::onnx_import
