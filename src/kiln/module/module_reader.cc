// load_module and load_module_from_bytes (declared in module.h). The file is untrusted: nothing
// in it is used before the header, the checksum, the flatbuffer and every index and range have
// been checked.

#include <cstdlib>
#include <cstring>
#include <memory>

#include "kiln/base/aligned_memory.h"
#include "kiln/base/checked_math.h"
#include "kiln/base/mapped_file.h"
#include "kiln/module/dim_text_guard.h"
#include "kiln/module/module.h"
#include "kiln/module/module_generated.h"
#include "kiln/module/module_header.h"

namespace kiln::module {
namespace {

namespace fbs = flatbuffers;

// The schema nests at most 5 deep, plus 4 per level of bodies (a Module's dispatches vector, a
// Dispatch, its bodies vector, a Module), kMaxBodyDepth levels at most; a deeper file fails the
// verifier before anything recurses over it. The table limit only stops a hostile file from
// making the verifier revisit shared tables without end (a real module has a few tables per
// value and dispatch).
constexpr fbs::uoffset_t kMaxVerifierDepth = 8 + 4 * (kMaxBodyDepth + 1);
constexpr fbs::uoffset_t kMaxVerifierTables = fbs::uoffset_t{1} << 24;

// Owns what the Tensors of a loaded module borrow, and the contents themselves; the returned
// shared_ptr aliases `contents` so that it keeps `storage` alive too.
struct LoadedModule {
  std::shared_ptr<const void> storage;
  ModuleContents contents;
};

Status with_source(Status status, std::string_view source) {
  Status out(status.code(), fmt::format("{}: {}", source, status.message()));
  for (const std::string& note : status.notes()) out.with_note(note);
  return out;
}

template <typename T>
size_t size_of(const fbs::Vector<T>* vector) {
  return vector == nullptr ? 0 : vector->size();
}

// Converts the verified flatbuffer into ModuleContents. Flatbuffers may legally share one string,
// vector or table between many references, which would let a small file decode into an enormous
// structure. kiln's writer never shares, so every decoded element stands for at least as many
// distinct bytes of metadata as it is charged here (4 per offset, the scalar size, the string
// length), and the total charge may not exceed the metadata size.
class Converter {
 public:
  // `mapped`: the constants lie in a MappedFile, so their tensors may release resident pages.
  Converter(const fb::Module& root, uint64_t metadata_size, const std::byte* constants,
            uint64_t constants_size, std::shared_ptr<const void> storage, bool mapped)
      : root_(root),
        budget_(metadata_size),
        constants_(constants),
        constants_size_(constants_size),
        storage_(std::move(storage)),
        mapped_(mapped) {}

  StatusOr<ModuleContents> convert() { return convert_module(root_, 0); }

 private:
  StatusOr<ModuleContents> convert_module(const fb::Module& root, int depth) {
    ModuleContents out;
    KILN_ASSIGN_OR_RETURN(out.model_name, string(root.model_name()));
    KILN_ASSIGN_OR_RETURN(out.producer, string(root.producer()));
    KILN_ASSIGN_OR_RETURN(out.symbols, strings(root.symbols()));
    KILN_ASSIGN_OR_RETURN(out.inputs, scalars(root.inputs()));
    KILN_ASSIGN_OR_RETURN(out.outputs, scalars(root.outputs()));
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(root.values())));
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(root.dispatches())));
    out.values.reserve(size_of(root.values()));
    for (size_t i = 0; i < size_of(root.values()); ++i) {
      const fb::Value* value = root.values()->Get(static_cast<fbs::uoffset_t>(i));
      auto converted = convert_value(*value);
      if (!converted.ok()) {
        return invalid_argument("value {} '{}': {}", i,
                                value->name() ? value->name()->string_view() : "",
                                converted.status().message());
      }
      out.values.push_back(std::move(converted).value());
    }
    out.dispatches.reserve(size_of(root.dispatches()));
    for (size_t i = 0; i < size_of(root.dispatches()); ++i) {
      const fb::Dispatch* dispatch = root.dispatches()->Get(static_cast<fbs::uoffset_t>(i));
      auto converted = convert_dispatch(*dispatch, depth);
      if (!converted.ok()) {
        return invalid_argument("dispatch {} '{}' ({}): {}", i,
                                dispatch->name() ? dispatch->name()->string_view() : "",
                                dispatch->op_type() ? dispatch->op_type()->string_view() : "",
                                converted.status().message());
      }
      out.dispatches.push_back(std::move(converted).value());
    }
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(root.assumptions())));
    for (size_t i = 0; i < size_of(root.assumptions()); ++i) {
      const fb::Assumption* in = root.assumptions()->Get(static_cast<fbs::uoffset_t>(i));
      auto converted = convert_assumption(*in);
      if (!converted.ok()) {
        return invalid_argument("assumption {}: {}", i, converted.status().message());
      }
      out.assumptions.push_back(std::move(converted).value());
    }
    return out;
  }

  Status spend(uint64_t bytes) {
    if (bytes > budget_) {
      return invalid_argument(
          "the metadata decodes to more data than it holds (shared strings, vectors or tables "
          "are not allowed)");
    }
    budget_ -= bytes;
    return ok_status();
  }
  Status spend_offsets(size_t count) { return spend(uint64_t{4} * count); }

  StatusOr<std::string> string(const fbs::String* s) {
    if (s == nullptr) return std::string();
    KILN_RETURN_IF_ERROR(spend(s->size()));
    return s->str();
  }

  StatusOr<std::vector<std::string>> strings(const fbs::Vector<fbs::Offset<fbs::String>>* v) {
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(v)));
    std::vector<std::string> out;
    out.reserve(size_of(v));
    for (size_t i = 0; i < size_of(v); ++i) {
      KILN_ASSIGN_OR_RETURN(std::string s, string(v->Get(static_cast<fbs::uoffset_t>(i))));
      out.push_back(std::move(s));
    }
    return out;
  }

  // The verifier aligns a vector's length, not its 8-byte elements, so elements are copied as
  // bytes rather than read in place.
  template <typename T>
  StatusOr<std::vector<T>> scalars(const fbs::Vector<T>* v) {
    KILN_RETURN_IF_ERROR(spend(uint64_t{sizeof(T)} * size_of(v)));
    std::vector<T> out(size_of(v));
    if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
    for (T& x : out) x = fbs::EndianScalar(x);
    return out;
  }

  // Parses one dim expression; `what` names it in errors.
  StatusOr<DimExpr> read_dim(const fbs::String* text, std::string_view what) {
    if (text == nullptr) return invalid_argument("{} is missing", what);
    if (text->size() > kMaxDimTextLength) {
      return invalid_argument("{} is {} characters long, over the limit of {}", what, text->size(),
                              kMaxDimTextLength);
    }
    KILN_RETURN_IF_ERROR(spend(text->size()));
    // Only the canonical form is parsed: other text could make the parser expand without end.
    Status canonical = check_canonical_dim_text(text->string_view());
    if (!canonical.ok()) return invalid_argument("{}: {}", what, canonical.message());
    auto dim = parse_dim_expr(text->string_view());
    if (!dim.ok()) return invalid_argument("{}: {}", what, dim.status().message());
    // min/max operands that simplify (min(N, N + 1)) pass the guard but read back otherwise.
    if (dim->to_string() != text->string_view()) {
      return invalid_argument("{}: '{}' is not in kiln's canonical dim form (reads as '{}')", what,
                              text->string_view(), dim->to_string());
    }
    return std::move(dim).value();
  }

  // Parses a list of dim expressions (a value's dims, or its known element values).
  StatusOr<std::vector<DimExpr>> read_dims(const fbs::Vector<fbs::Offset<fbs::String>>* list,
                                           std::string_view what) {
    std::vector<DimExpr> out;
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(list)));
    for (size_t d = 0; d < size_of(list); ++d) {
      KILN_ASSIGN_OR_RETURN(DimExpr dim, read_dim(list->Get(static_cast<fbs::uoffset_t>(d)),
                                                  fmt::format("{} {}", what, d)));
      out.push_back(std::move(dim));
    }
    return out;
  }

  StatusOr<Assumption> convert_assumption(const fb::Assumption& in) {
    Assumption out;
    if (in.kind() > static_cast<uint8_t>(Assumption::Kind::kDivisible)) {
      return invalid_argument("invalid kind code {}", static_cast<int>(in.kind()));
    }
    out.kind = static_cast<Assumption::Kind>(in.kind());
    KILN_ASSIGN_OR_RETURN(out.lhs, read_dim(in.lhs(), "lhs"));
    KILN_ASSIGN_OR_RETURN(out.rhs, read_dim(in.rhs(), "rhs"));
    KILN_ASSIGN_OR_RETURN(out.origin, string(in.origin()));
    return out;
  }

  StatusOr<ModuleValue> convert_value(const fb::Value& in) {
    ModuleValue out;
    KILN_ASSIGN_OR_RETURN(out.name, string(in.name()));
    if (!is_valid_dtype_code(in.dtype())) {
      return invalid_argument("invalid dtype code {}", static_cast<int>(in.dtype()));
    }
    out.dtype = static_cast<DType>(in.dtype());
    if (in.kind() > static_cast<uint8_t>(ValueKind::kIntermediate)) {
      return invalid_argument("invalid kind code {}", static_cast<int>(in.kind()));
    }
    out.kind = static_cast<ValueKind>(in.kind());
    if (in.form() >= kValueFormCount) {
      return invalid_argument("invalid form code {}", static_cast<int>(in.form()));
    }
    out.form = static_cast<ValueForm>(in.form());
    KILN_ASSIGN_OR_RETURN(out.shape, read_dims(in.dims(), "dim"));
    KILN_ASSIGN_OR_RETURN(out.known_values, read_dims(in.values(), "known value"));
    if (out.kind != ValueKind::kConstant) {
      if (in.constant_offset() != 0 || in.constant_size() != 0) {
        return invalid_argument("a value that is not a constant has a constant data range");
      }
      return out;
    }
    KILN_ASSIGN_OR_RETURN(out.constant, borrow_constant(in, out));
    return out;
  }

  StatusOr<Tensor> borrow_constant(const fb::Value& in, const ModuleValue& value) {
    ConcreteShape dims;
    for (const DimExpr& dim : value.shape) {
      std::optional<int64_t> c = dim.constant_value();
      if (!c || *c < 0) {
        return invalid_argument("a constant must have static non-negative dims, got {}",
                                shape_to_string(value.shape));
      }
      dims.push_back(*c);
    }
    std::optional<int64_t> count = checked_product(dims);
    std::optional<int64_t> bytes =
        count ? checked_mul(*count, static_cast<int64_t>(dtype_size(value.dtype))) : std::nullopt;
    if (!bytes) return invalid_argument("constant dims {} overflow", shape_to_string(dims));
    uint64_t offset = in.constant_offset();
    uint64_t size = in.constant_size();
    if (size != static_cast<uint64_t>(*bytes)) {
      return invalid_argument("constant data is {} bytes, but {} {} needs {}", size,
                              shape_to_string(dims), dtype_name(value.dtype), *bytes);
    }
    if (offset % kSegmentAlignment != 0) {
      return invalid_argument("constant offset {} is not a multiple of {}", offset,
                              kSegmentAlignment);
    }
    if (offset > constants_size_ || size > constants_size_ - offset) {
      return invalid_argument(
          "constant bytes [{}, {}) are outside the constants segment of {} bytes", offset,
          offset + size, constants_size_);
    }
    const std::byte* data = constants_ + offset;
    if (mapped_) return Tensor::borrow_mapped(value.dtype, std::move(dims), data, storage_);
    return Tensor::borrow(value.dtype, std::move(dims), data, storage_);
  }

  StatusOr<Dispatch> convert_dispatch(const fb::Dispatch& in, int depth) {
    Dispatch out;
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(in.bodies())));
    if (size_of(in.bodies()) > 0 && depth >= kMaxBodyDepth) {
      return invalid_argument("bodies nested more than {} deep", kMaxBodyDepth);
    }
    for (size_t b = 0; b < size_of(in.bodies()); ++b) {
      auto body = convert_module(*in.bodies()->Get(static_cast<fbs::uoffset_t>(b)), depth + 1);
      if (!body.ok()) return invalid_argument("body {}: {}", b, body.status().message());
      out.bodies.push_back(std::make_shared<const ModuleContents>(std::move(body).value()));
    }
    KILN_ASSIGN_OR_RETURN(out.name, string(in.name()));
    KILN_ASSIGN_OR_RETURN(out.op_type, string(in.op_type()));
    KILN_ASSIGN_OR_RETURN(out.inputs, scalars(in.inputs()));
    KILN_ASSIGN_OR_RETURN(out.outputs, scalars(in.outputs()));
    KILN_RETURN_IF_ERROR(spend_offsets(size_of(in.attributes())));
    KILN_ASSIGN_OR_RETURN(out.origins, strings(in.origins()));
    KILN_ASSIGN_OR_RETURN(out.data_symbols, strings(in.data_symbols()));
    for (size_t i = 0; i < size_of(in.attributes()); ++i) {
      const fb::Attr* attr = in.attributes()->Get(static_cast<fbs::uoffset_t>(i));
      KILN_ASSIGN_OR_RETURN(std::string name, string(attr->name()));
      if (out.attributes.has(name)) return invalid_argument("attribute '{}' appears twice", name);
      auto value = convert_attribute(*attr);
      if (!value.ok()) {
        return invalid_argument("attribute '{}': {}", name, value.status().message());
      }
      out.attributes.set(std::move(name), std::move(value).value());
    }
    return out;
  }

  StatusOr<Attribute> convert_attribute(const fb::Attr& in) {
    switch (in.value_type()) {
      case fb::AttrValue::IntAttr:
        if (auto* a = in.value_as_IntAttr()) return Attribute(a->value());
        break;
      case fb::AttrValue::FloatAttr:
        if (auto* a = in.value_as_FloatAttr()) return Attribute(a->value());
        break;
      case fb::AttrValue::StringAttr:
        if (auto* a = in.value_as_StringAttr()) {
          KILN_ASSIGN_OR_RETURN(std::string s, string(a->value()));
          return Attribute(std::move(s));
        }
        break;
      case fb::AttrValue::IntsAttr:
        if (auto* a = in.value_as_IntsAttr()) {
          KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, scalars(a->values()));
          return Attribute(std::move(v));
        }
        break;
      case fb::AttrValue::FloatsAttr:
        if (auto* a = in.value_as_FloatsAttr()) {
          KILN_ASSIGN_OR_RETURN(std::vector<double> v, scalars(a->values()));
          return Attribute(std::move(v));
        }
        break;
      case fb::AttrValue::StringsAttr:
        if (auto* a = in.value_as_StringsAttr()) {
          KILN_ASSIGN_OR_RETURN(std::vector<std::string> v, strings(a->values()));
          return Attribute(std::move(v));
        }
        break;
      case fb::AttrValue::NONE: return invalid_argument("the attribute has no value");
      default:
        return invalid_argument("unknown attribute kind {}", static_cast<int>(in.value_type()));
    }
    // A known kind whose table is absent.
    return invalid_argument("the attribute has no value");
  }

  const fb::Module& root_;
  uint64_t budget_;
  const std::byte* constants_;
  uint64_t constants_size_;
  std::shared_ptr<const void> storage_;
  bool mapped_;
};

// Everything after reading the bytes; errors are not yet prefixed with the source.
// `mapped`: `data` is a MappedFile's, and `storage` that MappedFile.
StatusOr<std::shared_ptr<const ModuleContents>> load(const std::byte* data, size_t size,
                                                     std::shared_ptr<const void> storage,
                                                     const LoadOptions& options, bool mapped) {
  KILN_ASSIGN_OR_RETURN(ModuleHeader header, decode_header(data, size));
  if (options.verify_checksum) {
    uint64_t actual = file_checksum(data, size);
    if (actual != header.checksum) {
      return data_loss(
          "module checksum mismatch: the file is damaged (header {:016x}, contents {:016x})",
          header.checksum, actual);
    }
  }

  const auto* metadata = reinterpret_cast<const uint8_t*>(data + header.metadata_offset);
  // The size prefix must agree with the header, so a damaged metadata size is caught without the
  // checksum.
  uint32_t prefix = fbs::ReadScalar<uint32_t>(metadata);
  if (uint64_t{prefix} + sizeof(uint32_t) != header.metadata_size) {
    return data_loss("module metadata holds {} bytes, the header says {}: the file is damaged",
                     uint64_t{prefix} + sizeof(uint32_t), header.metadata_size);
  }
  fbs::Verifier::Options verifier_options;
  verifier_options.max_depth = kMaxVerifierDepth;
  verifier_options.max_tables = kMaxVerifierTables;
  verifier_options.check_alignment = true;
  fbs::Verifier verifier(metadata, static_cast<size_t>(header.metadata_size), verifier_options);
  if (!fb::VerifySizePrefixedModuleBuffer(verifier)) {
    return invalid_argument("module metadata is not a valid module flatbuffer");
  }
  const fb::Module* root = fb::GetSizePrefixedModule(metadata);

  auto loaded = std::make_shared<LoadedModule>();
  loaded->storage = storage;
  Converter converter(*root, header.metadata_size, data + header.constants_offset,
                      header.constants_size, std::move(storage), mapped);
  KILN_ASSIGN_OR_RETURN(loaded->contents, converter.convert());
  if (mapped) {
    loaded->contents.source_file = std::static_pointer_cast<const MappedFile>(loaded->storage);
  }
  KILN_RETURN_IF_ERROR(verify_contents(loaded->contents));
  // The checksum and the checks read every byte; loading is a map, so let them go until a
  // backend reads the constants it needs.
  if (mapped) release_mapped_pages(data, size);
  return std::shared_ptr<const ModuleContents>(loaded, &loaded->contents);
}

}  // namespace

StatusOr<std::shared_ptr<const ModuleContents>> load_module(const std::string& path,
                                                            LoadOptions options) {
  auto mapped = MappedFile::open(path);
  if (!mapped.ok()) return std::move(mapped).status();
  auto file = std::make_shared<const MappedFile>(std::move(mapped).value());
  const std::byte* data = file->data();
  size_t size = file->size();
  auto loaded = load(data, size, std::move(file), options, /*mapped=*/true);
  if (!loaded.ok()) return with_source(std::move(loaded).status(), fmt::format("'{}'", path));
  return loaded;
}

StatusOr<std::shared_ptr<const ModuleContents>> load_module_from_bytes(const void* data,
                                                                       size_t size,
                                                                       LoadOptions options) {
  // A copy in 64-byte aligned memory gives constants the same alignment as a mapped file.
  std::shared_ptr<std::byte> copy;
  if (size > SIZE_MAX - kSegmentAlignment) {
    return out_of_range("module bytes: {} bytes is too large to copy", size);
  }
  if (size > 0) {
    size_t rounded = (size + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
    void* raw = allocate_aligned_memory(rounded, kSegmentAlignment);
    if (raw == nullptr) return out_of_range("cannot allocate {} bytes for a module copy", size);
    std::memcpy(raw, data, size);
    copy.reset(static_cast<std::byte*>(raw), [](std::byte* p) { std::free(p); });
  }
  const std::byte* bytes = copy.get();
  auto loaded = load(bytes, size, std::move(copy), options, /*mapped=*/false);
  if (!loaded.ok()) return with_source(std::move(loaded).status(), "module bytes");
  return loaded;
}

}  // namespace kiln::module
