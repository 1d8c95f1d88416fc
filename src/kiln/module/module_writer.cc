// write_module (declared in module.h).

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "kiln/base/file_util.h"
#include "kiln/module/dim_text_guard.h"
#include "kiln/module/module.h"
#include "kiln/module/module_generated.h"
#include "kiln/module/module_header.h"

namespace kiln::module {
namespace {

namespace fbs = flatbuffers;

constexpr std::byte kZeros[kSegmentAlignment] = {};
// Bytes of a constant handed to a sink at a time (a multiple of any page size).
constexpr uint64_t kStreamedPiece = uint64_t{16} << 20;

struct ConstantPlacement {
  const Tensor* data = nullptr;
  uint64_t offset = 0;  // from the start of the constants segment
  uint64_t size = 0;
};

fbs::Offset<fbs::Vector<fbs::Offset<fbs::String>>> string_vector(
    fbs::FlatBufferBuilder& builder, const std::vector<std::string>& strings) {
  std::vector<fbs::Offset<fbs::String>> offsets;
  offsets.reserve(strings.size());
  for (const std::string& s : strings) offsets.push_back(builder.CreateString(s));
  return builder.CreateVector(offsets);
}

fbs::Offset<fb::Attr> build_attribute(fbs::FlatBufferBuilder& builder, const std::string& name,
                                      const Attribute& attribute) {
  auto name_offset = builder.CreateString(name);
  fb::AttrValue type = fb::AttrValue::NONE;
  fbs::Offset<void> value;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          type = fb::AttrValue::IntAttr;
          value = fb::CreateIntAttr(builder, v).Union();
        } else if constexpr (std::is_same_v<T, double>) {
          type = fb::AttrValue::FloatAttr;
          value = fb::CreateFloatAttr(builder, v).Union();
        } else if constexpr (std::is_same_v<T, std::string>) {
          type = fb::AttrValue::StringAttr;
          value = fb::CreateStringAttr(builder, builder.CreateString(v)).Union();
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          type = fb::AttrValue::IntsAttr;
          value = fb::CreateIntsAttr(builder, builder.CreateVector(v)).Union();
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          type = fb::AttrValue::FloatsAttr;
          value = fb::CreateFloatsAttr(builder, builder.CreateVector(v)).Union();
        } else {
          static_assert(std::is_same_v<T, std::vector<std::string>>);
          type = fb::AttrValue::StringsAttr;
          value = fb::CreateStringsAttr(builder, string_vector(builder, v)).Union();
        }
      },
      attribute);
  return fb::CreateAttr(builder, name_offset, type, value);
}

// A generous upper bound of the metadata size, so that an oversized module is an error rather
// than a flatbuffers assertion.
uint64_t estimate_metadata_size(const ModuleContents& contents) {
  uint64_t total = 0;
  for (const Dispatch& dispatch : contents.dispatches) {
    for (const auto& body : dispatch.bodies) total += estimate_metadata_size(*body);
  }
  total += 1024 + contents.model_name.size() + contents.producer.size();
  auto strings = [](const std::vector<std::string>& v) {
    uint64_t n = 0;
    for (const std::string& s : v) n += s.size() + 16;
    return n;
  };
  total += strings(contents.symbols) + 8 * (contents.inputs.size() + contents.outputs.size());
  for (const ModuleValue& value : contents.values) {
    total += 96 + value.name.size();
    for (const DimExpr& dim : value.shape) total += 16 + dim.to_string().size();
  }
  for (const Assumption& assumption : contents.assumptions) {
    total += 96 + assumption.lhs.to_string().size() + assumption.rhs.to_string().size() +
             assumption.origin.size();
  }
  for (const Dispatch& dispatch : contents.dispatches) {
    total += 96 + dispatch.name.size() + dispatch.op_type.size() + strings(dispatch.origins) +
             strings(dispatch.data_symbols) +
             8 * (dispatch.inputs.size() + dispatch.outputs.size());
    for (const auto& [name, attribute] : dispatch.attributes.all()) {
      total += 64 + name.size();
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
              total += v.size() + 16;
            } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
              total += strings(v);
            } else if constexpr (std::is_arithmetic_v<T>) {
              total += 16;
            } else {
              total += 16 + 8 * v.size();
            }
          },
          attribute);
    }
  }
  return total;
}

// The loader accepts only canonical dim text and must read back the same dims, so the writer
// refuses what would not survive (e.g. coefficients wrapped around to INT64_MIN).
Status check_dim_text(const DimExpr& dim, std::string_view what) {
  std::string text = dim.to_string();
  Status canonical = check_canonical_dim_text(text);
  auto parsed = canonical.ok() ? parse_dim_expr(text) : StatusOr<DimExpr>(canonical);
  if (!parsed.ok() || *parsed != dim) {
    return invalid_argument("{} '{}' does not survive its text form{}{}", what, text,
                            parsed.ok() ? "" : ": ", parsed.ok() ? "" : parsed.status().message());
  }
  return ok_status();
}

Status check_dim_texts(const ModuleContents& contents) {
  for (const Dispatch& dispatch : contents.dispatches) {
    for (const auto& body : dispatch.bodies) KILN_RETURN_IF_ERROR(check_dim_texts(*body));
  }
  for (size_t i = 0; i < contents.values.size(); ++i) {
    const ModuleValue& value = contents.values[i];
    for (size_t d = 0; d < value.shape.size(); ++d) {
      KILN_RETURN_IF_ERROR(
          check_dim_text(value.shape[d], fmt::format("value {} '{}': dim {}", i, value.name, d)));
    }
  }
  for (size_t i = 0; i < contents.assumptions.size(); ++i) {
    const Assumption& assumption = contents.assumptions[i];
    KILN_RETURN_IF_ERROR(check_dim_text(assumption.lhs, fmt::format("assumption {}", i)));
    KILN_RETURN_IF_ERROR(check_dim_text(assumption.rhs, fmt::format("assumption {}", i)));
  }
  return ok_status();
}

// Every module's values in one order, the module's own first, then each dispatch's bodies in
// turn (recursively): the order of the placements and of build_module's reads.
void place_module(const ModuleContents& contents, std::vector<ConstantPlacement>& placements,
                  uint64_t& next, Status& status) {
  for (size_t i = 0; i < contents.values.size(); ++i) {
    const ModuleValue& value = contents.values[i];
    placements.emplace_back();
    if (value.kind != ValueKind::kConstant || !status.ok()) continue;
    uint64_t size = value.constant.byte_size();
    if (size > (uint64_t{1} << 62) - next) {
      status = invalid_argument("the constants exceed 4 EiB at value {} '{}'", i, value.name);
      continue;
    }
    placements.back() = {&value.constant, next, size};
    next = align_to_segment(next + size);
  }
  for (const Dispatch& dispatch : contents.dispatches) {
    for (const auto& body : dispatch.bodies) place_module(*body, placements, next, status);
  }
}

StatusOr<std::vector<ConstantPlacement>> place_constants(const ModuleContents& contents,
                                                         uint64_t* segment_size) {
  std::vector<ConstantPlacement> placements;
  uint64_t next = 0;
  Status status = ok_status();
  place_module(contents, placements, next, status);
  KILN_RETURN_IF_ERROR(status);
  *segment_size = next;
  return placements;
}

// One module table; `cursor` walks the placements in place_module's order.
fbs::Offset<fb::Module> build_module(fbs::FlatBufferBuilder& builder,
                                     const ModuleContents& contents,
                                     const std::vector<ConstantPlacement>& placements,
                                     size_t& cursor) {
  const size_t first = cursor;
  cursor += contents.values.size();
  std::vector<fbs::Offset<fb::Value>> values;
  values.reserve(contents.values.size());
  for (size_t i = 0; i < contents.values.size(); ++i) {
    const ModuleValue& value = contents.values[i];
    std::vector<std::string> dims;
    dims.reserve(value.shape.size());
    for (const DimExpr& dim : value.shape) dims.push_back(dim.to_string());
    std::vector<std::string> known;
    for (const DimExpr& v : value.known_values) known.push_back(v.to_string());
    auto name = builder.CreateString(value.name);
    auto dims_offset = string_vector(builder, dims);
    auto known_offset = known.empty() ? 0 : string_vector(builder, known);
    const ConstantPlacement& placement = placements[first + i];
    values.push_back(fb::CreateValue(builder, name, static_cast<uint8_t>(value.dtype), dims_offset,
                                     static_cast<uint8_t>(value.kind), placement.offset,
                                     placement.size, known_offset,
                                     static_cast<uint8_t>(value.form)));
  }
  std::vector<fbs::Offset<fb::Dispatch>> dispatches;
  dispatches.reserve(contents.dispatches.size());
  for (const Dispatch& dispatch : contents.dispatches) {
    std::vector<fbs::Offset<fb::Module>> bodies;
    for (const auto& body : dispatch.bodies) {
      bodies.push_back(build_module(builder, *body, placements, cursor));
    }
    std::vector<fbs::Offset<fb::Attr>> attributes;
    for (const auto& [name, attribute] : dispatch.attributes.all()) {
      attributes.push_back(build_attribute(builder, name, attribute));
    }
    auto name = builder.CreateString(dispatch.name);
    auto op_type = builder.CreateString(dispatch.op_type);
    auto inputs = builder.CreateVector(dispatch.inputs);
    auto outputs = builder.CreateVector(dispatch.outputs);
    auto attributes_offset = builder.CreateVector(attributes);
    auto origins = string_vector(builder, dispatch.origins);
    auto data_symbols = string_vector(builder, dispatch.data_symbols);
    auto bodies_offset = bodies.empty() ? 0 : builder.CreateVector(bodies);
    dispatches.push_back(fb::CreateDispatch(builder, name, op_type, inputs, outputs,
                                            attributes_offset, origins, data_symbols,
                                            bodies_offset));
  }
  auto model_name = builder.CreateString(contents.model_name);
  auto producer = builder.CreateString(contents.producer);
  auto symbols = string_vector(builder, contents.symbols);
  auto values_offset = builder.CreateVector(values);
  auto inputs = builder.CreateVector(contents.inputs);
  auto outputs = builder.CreateVector(contents.outputs);
  auto dispatches_offset = builder.CreateVector(dispatches);
  std::vector<fbs::Offset<fb::Assumption>> assumptions;
  for (const Assumption& assumption : contents.assumptions) {
    auto lhs = builder.CreateString(assumption.lhs.to_string());
    auto rhs = builder.CreateString(assumption.rhs.to_string());
    auto origin = builder.CreateString(assumption.origin);
    assumptions.push_back(
        fb::CreateAssumption(builder, static_cast<uint8_t>(assumption.kind), lhs, rhs, origin));
  }
  auto assumptions_offset = builder.CreateVector(assumptions);
  return fb::CreateModule(builder, model_name, producer, symbols, values_offset, inputs, outputs,
                          dispatches_offset, assumptions_offset);
}

std::vector<uint8_t> build_metadata(const ModuleContents& contents,
                                    const std::vector<ConstantPlacement>& placements) {
  fbs::FlatBufferBuilder builder(4096);
  size_t cursor = 0;
  auto root = build_module(builder, contents, placements, cursor);
  fb::FinishSizePrefixedModuleBuffer(builder, root);
  return std::vector<uint8_t>(builder.GetBufferPointer(),
                              builder.GetBufferPointer() + builder.GetSize());
}

// Visits the bytes after the header in file order, in pieces that the caller hashes or writes.
template <typename Sink>
Status for_each_piece(const std::vector<uint8_t>& metadata,
                      const std::vector<ConstantPlacement>& placements, uint64_t padding,
                      Sink&& sink) {
  KILN_RETURN_IF_ERROR(sink(metadata.data(), metadata.size()));
  KILN_RETURN_IF_ERROR(sink(kZeros, padding));
  uint64_t position = 0;
  for (const ConstantPlacement& placement : placements) {
    if (placement.data == nullptr) continue;
    const std::byte* bytes = placement.data->bytes().data();
    // A constant still in its file (a mapped model's weights) leaves resident memory piece by
    // piece as it is streamed, so a module of any size is written in little memory.
    for (uint64_t done = 0; done < placement.size; done += kStreamedPiece) {
      const uint64_t piece = std::min(kStreamedPiece, placement.size - done);
      KILN_RETURN_IF_ERROR(sink(bytes + done, piece));
      placement.data->release_resident(done, piece);
    }
    position = placement.offset + placement.size;
    KILN_RETURN_IF_ERROR(sink(kZeros, align_to_segment(position) - position));
  }
  return ok_status();
}

}  // namespace

namespace {

// A module laid out for writing: everything but the bytes themselves and the header's checksum
// (computed as the bytes are written).
struct LaidOut {
  ModuleHeader header;
  std::vector<uint8_t> metadata;
  std::vector<ConstantPlacement> placements;
  uint64_t padding = 0;  // between the metadata and the constants segment
};

// Verifies `contents` and lays it out; errors read "cannot write <what>: ...".
StatusOr<LaidOut> lay_out(const ModuleContents& contents, std::string_view what) {
  Status valid = verify_contents(contents);
  if (valid.ok()) valid = check_dim_texts(contents);
  if (!valid.ok()) {
    return Status(valid.code(), fmt::format("cannot write {}: {}", what, valid.message()));
  }
  if (estimate_metadata_size(contents) >= kMaxMetadataSize) {
    return out_of_range("cannot write {}: its metadata would exceed the 2 GiB limit", what);
  }
  LaidOut out;
  uint64_t constants_size = 0;
  auto placements = place_constants(contents, &constants_size);
  if (!placements.ok()) {
    return Status(placements.status().code(),
                  fmt::format("cannot write {}: {}", what, placements.status().message()));
  }
  out.placements = std::move(placements).value();
  out.metadata = build_metadata(contents, out.placements);
  out.header.metadata_offset = kHeaderSize;
  out.header.metadata_size = out.metadata.size();
  out.header.constants_offset = align_to_segment(kHeaderSize + out.metadata.size());
  out.header.constants_size = constants_size;
  out.padding = out.header.constants_offset - kHeaderSize - out.metadata.size();
  return out;
}

// The checksum of the bytes after the header (module_header.h), fed in file order.
class Checksum {
 public:
  static StatusOr<Checksum> start() {
    Checksum sum;
    if (sum.state_ == nullptr || XXH64_reset(sum.state_.get(), 0) != XXH_OK) {
      return internal_error("xxHash state allocation failed");
    }
    return sum;
  }
  Status add(const void* bytes, uint64_t size) {
    if (XXH64_update(state_.get(), bytes, size) != XXH_OK) {
      return internal_error("xxHash update failed");
    }
    return ok_status();
  }
  uint64_t digest() const { return XXH64_digest(state_.get()); }

 private:
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state_{XXH64_createState(),
                                                                    &XXH64_freeState};
};

// Feeds every byte after the header to `sink`, then checks that the constants read in place from
// files (Tensor::borrow_from_file) were those files' bytes all along.
template <typename Sink>
Status emit_body(const LaidOut& module, Sink&& sink) {
  KILN_RETURN_IF_ERROR(for_each_piece(module.metadata, module.placements, module.padding, sink));
  for (const ConstantPlacement& placement : module.placements) {
    if (placement.data == nullptr) continue;
    Status unchanged = placement.data->source_unchanged();
    if (!unchanged.ok()) {
      return Status(unchanged.code(), fmt::format("a constant's file changed while it was read: {}",
                                                  unchanged.message()));
    }
  }
  return ok_status();
}

// Writes the module in one pass over its bytes to an output that can go back: the header's place
// first, the body hashed as it is appended, then the header with its checksum over its place.
// `append(p, n)` and `overwrite_header(p, n)` return Status.
template <typename Append, typename OverwriteHeader>
Status emit_in_one_pass(LaidOut& module, Append&& append, OverwriteHeader&& overwrite_header) {
  const auto placeholder = encode_header(module.header);
  KILN_RETURN_IF_ERROR(append(placeholder.data(), placeholder.size()));
  KILN_ASSIGN_OR_RETURN(Checksum sum, Checksum::start());
  KILN_RETURN_IF_ERROR(emit_body(module, [&](const void* p, uint64_t n) {
    KILN_RETURN_IF_ERROR(sum.add(p, n));
    return append(p, n);
  }));
  module.header.checksum = sum.digest();
  const auto header = encode_header(module.header);
  return overwrite_header(header.data(), header.size());
}

// Writes the module to a stream, which cannot go back: the checksum in the header precedes the
// bytes it covers, so they are visited twice (hashed, then written) rather than assembled in
// memory (constants can be gigabytes).
template <typename Append>
Status emit_in_two_passes(LaidOut& module, Append&& append) {
  KILN_ASSIGN_OR_RETURN(Checksum sum, Checksum::start());
  KILN_RETURN_IF_ERROR(for_each_piece(module.metadata, module.placements, module.padding,
                                      [&](const void* p, uint64_t n) { return sum.add(p, n); }));
  module.header.checksum = sum.digest();
  const auto header = encode_header(module.header);
  KILN_RETURN_IF_ERROR(append(header.data(), header.size()));
  return emit_body(module, append);
}

}  // namespace

Status write_module(const ModuleContents& contents, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(LaidOut module, lay_out(contents, fmt::format("module '{}'", path)));
  KILN_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::open(path));
  auto append = [&](const void* p, uint64_t n) { return out.append(p, n); };
  if (out.streaming()) {
    KILN_RETURN_IF_ERROR(emit_in_two_passes(module, append));
  } else {
    KILN_RETURN_IF_ERROR(emit_in_one_pass(module, append, [&](const void* p, uint64_t n) {
      return out.overwrite(0, std::string_view(static_cast<const char*>(p), n));
    }));
  }
  const uint64_t expected = module.header.constants_offset + module.header.constants_size;
  if (out.bytes_written() != expected) {
    return internal_error("module writer produced {} bytes for '{}', expected {}",
                          out.bytes_written(), path, expected);
  }
  return out.commit();
}

StatusOr<std::vector<uint8_t>> serialize_module(const ModuleContents& contents) {
  KILN_ASSIGN_OR_RETURN(LaidOut module, lay_out(contents, "module"));
  std::vector<uint8_t> bytes;
  bytes.reserve(module.header.constants_offset + module.header.constants_size);
  KILN_RETURN_IF_ERROR(emit_in_one_pass(
      module,
      [&](const void* p, uint64_t n) {
        const auto* begin = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), begin, begin + n);
        return ok_status();
      },
      [&](const void* p, uint64_t n) {
        std::memcpy(bytes.data(), p, n);
        return ok_status();
      }));
  return bytes;
}

}  // namespace kiln::module
