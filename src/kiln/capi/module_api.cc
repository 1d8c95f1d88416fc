// The C API's module functions (include/kiln/kiln.h): loading and describing modules.
#include "kiln/capi/handles.h"

using kiln::capi::guarded;

namespace {

kiln::module::LoadOptions load_options(const kiln_load_options* options) {
  kiln::module::LoadOptions out;
  out.verify_checksum = options == nullptr || options->trust_module == 0;
  return out;
}

kiln::Status store(kiln::StatusOr<std::shared_ptr<const kiln::module::ModuleContents>> contents,
                   kiln_module** out_module) {
  if (!contents.ok()) return std::move(contents).status();
  *out_module = new kiln_module{kiln::capi::describe_module(std::move(contents).value())};
  return kiln::ok_status();
}

kiln_status* value_info(const std::vector<kiln::capi::ValueInfo>& values, size_t index,
                        const char* what, kiln_value_info* out_info) {
  return guarded([&]() -> kiln::Status {
    if (out_info == nullptr) return kiln::invalid_argument("{} info: out_info is null", what);
    if (index >= values.size()) {
      return kiln::out_of_range("{} {} does not exist: the module has {}", what, index,
                                values.size());
    }
    kiln::capi::fill_value_info(values[index], out_info);
    return kiln::ok_status();
  });
}

}  // namespace

extern "C" {

kiln_status* kiln_module_load_file(const char* path, const kiln_load_options* options,
                                   kiln_module** out_module) {
  return guarded([&]() -> kiln::Status {
    if (path == nullptr || out_module == nullptr) {
      return kiln::invalid_argument("kiln_module_load_file: path and out_module must be set");
    }
    return store(kiln::module::load_module(path, load_options(options)), out_module);
  });
}

kiln_status* kiln_module_load_memory(const void* data, size_t size,
                                     const kiln_load_options* options, kiln_module** out_module) {
  return guarded([&]() -> kiln::Status {
    if ((data == nullptr && size > 0) || out_module == nullptr) {
      return kiln::invalid_argument("kiln_module_load_memory: data and out_module must be set");
    }
    return store(kiln::module::load_module_from_bytes(data, size, load_options(options)),
                 out_module);
  });
}

void kiln_module_release(kiln_module* module) { delete module; }

size_t kiln_module_input_count(const kiln_module* module) {
  return module == nullptr ? 0 : module->loaded->inputs.size();
}

size_t kiln_module_output_count(const kiln_module* module) {
  return module == nullptr ? 0 : module->loaded->outputs.size();
}

kiln_status* kiln_module_input_info(const kiln_module* module, size_t index,
                                    kiln_value_info* out_info) {
  if (module == nullptr) return kiln::capi::to_c_status(kiln::invalid_argument("module is null"));
  return value_info(module->loaded->inputs, index, "input", out_info);
}

kiln_status* kiln_module_output_info(const kiln_module* module, size_t index,
                                     kiln_value_info* out_info) {
  if (module == nullptr) return kiln::capi::to_c_status(kiln::invalid_argument("module is null"));
  return value_info(module->loaded->outputs, index, "output", out_info);
}

const char* kiln_module_name(const kiln_module* module) {
  return module == nullptr ? "" : module->loaded->contents->model_name.c_str();
}

}  // extern "C"
