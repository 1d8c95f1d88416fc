// The C API's session functions (include/kiln/kiln.h): creating sessions and running them.
#include <fmt/format.h>

#include "kiln/backends/builtin.h"
#include "kiln/capi/handles.h"
#include "kiln/hal/registry.h"

struct kiln_session {
  kiln_module module;  // shares the loaded module with the handle it was made from
  std::unique_ptr<kiln::runtime::Session> session;
};

struct kiln_outputs {
  std::vector<kiln::Tensor> tensors;
  std::vector<kiln_tensor> views;  // point into `tensors`
};

namespace {

using kiln::Status;
using kiln::StatusOr;
using kiln::Tensor;
using kiln::capi::guarded;

std::string describe(const char* what, size_t index,
                     const std::vector<kiln::capi::ValueInfo>& values) {
  if (index < values.size()) return fmt::format("{} {} '{}'", what, index, values[index].name);
  return fmt::format("{} {}", what, index);
}

// The caller's inputs as kiln tensors (borrowed where aligned); errors name the input.
StatusOr<std::vector<Tensor>> input_tensors(const kiln_session& session, const kiln_tensor* inputs,
                                            size_t count) {
  const auto& declared = session.module.loaded->inputs;
  if (count != declared.size()) {
    std::vector<std::string> names;
    for (const auto& value : declared) names.push_back("'" + value.name + "'");
    return kiln::invalid_argument("the module takes {} input(s) ({}), got {}", declared.size(),
                                  fmt::join(names, ", "), count);
  }
  if (count > 0 && inputs == nullptr) return kiln::invalid_argument("inputs is null");
  std::vector<Tensor> tensors;
  tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor tensor,
                          kiln::capi::tensor_from_c(inputs[i], describe("input", i, declared)));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

Status check_session(const kiln_session* session) {
  if (session == nullptr) return kiln::invalid_argument("session is null");
  return kiln::ok_status();
}

}  // namespace

extern "C" {

kiln_status* kiln_session_create(const kiln_module* module, const kiln_session_options* options,
                                 kiln_session** out_session) {
  return guarded([&]() -> Status {
    if (module == nullptr || out_session == nullptr) {
      return kiln::invalid_argument("kiln_session_create: module and out_session must be set");
    }
    // The C API (and Python on it) passes tensors only; sequences and optionals go through the
    // C++ Session::run_values.
    const kiln::module::ModuleContents& contents = *module->loaded->contents;
    for (const auto* ports : {&contents.inputs, &contents.outputs}) {
      for (int32_t id : *ports) {
        const kiln::module::ModuleValue& value = contents.values[static_cast<size_t>(id)];
        if (value.form == kiln::ValueForm::kTensor) continue;
        return kiln::unimplemented(
            "kiln_session_create: the module's {} '{}' is a {}; the C API takes and gives tensors "
            "only (C++: kiln::runtime::Session::run_values)",
            ports == &contents.inputs ? "input" : "output", value.name,
            kiln::value_form_name(value.form));
      }
    }
    kiln::backends::register_builtin_backends();
    kiln::runtime::SessionOptions session_options;
    if (options != nullptr) {
      if (options->device != nullptr) session_options.device = options->device;
      session_options.threads = options->threads;
      session_options.max_memory_bytes = options->max_memory_bytes;
    }
    KILN_ASSIGN_OR_RETURN(
        std::unique_ptr<kiln::runtime::Session> session,
        kiln::runtime::Session::create(module->loaded->contents, session_options));
    *out_session = new kiln_session{kiln_module{module->loaded}, std::move(session)};
    return kiln::ok_status();
  });
}

void kiln_session_release(kiln_session* session) { delete session; }

const kiln_module* kiln_session_module(const kiln_session* session) {
  return session == nullptr ? nullptr : &session->module;
}

const char* kiln_device_names(void) {
  static const std::string names = [] {
    kiln::backends::register_builtin_backends();
    return kiln::hal::device_names();
  }();
  return names.c_str();
}

size_t kiln_outputs_count(const kiln_outputs* outputs) {
  return outputs == nullptr ? 0 : outputs->views.size();
}

const kiln_tensor* kiln_outputs_get(const kiln_outputs* outputs, size_t index) {
  if (outputs == nullptr || index >= outputs->views.size()) return nullptr;
  return &outputs->views[index];
}

void kiln_outputs_release(kiln_outputs* outputs) { delete outputs; }

kiln_status* kiln_session_run(kiln_session* session, const kiln_tensor* inputs, size_t input_count,
                              kiln_outputs** out_outputs) {
  return guarded([&]() -> Status {
    KILN_RETURN_IF_ERROR(check_session(session));
    if (out_outputs == nullptr) return kiln::invalid_argument("out_outputs is null");
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                          input_tensors(*session, inputs, input_count));
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> results, session->session->run(tensors));
    auto outputs = std::make_unique<kiln_outputs>();
    outputs->tensors = std::move(results);
    for (Tensor& tensor : outputs->tensors) {
      outputs->views.push_back(kiln_tensor{static_cast<kiln_dtype>(tensor.dtype()),
                                           tensor.shape().size(), tensor.shape().data(),
                                           tensor.mutable_data()});
    }
    *out_outputs = outputs.release();
    return kiln::ok_status();
  });
}

kiln_status* kiln_session_run_into(kiln_session* session, const kiln_tensor* inputs,
                                   size_t input_count, kiln_tensor* outputs, size_t output_count) {
  return guarded([&]() -> Status {
    KILN_RETURN_IF_ERROR(check_session(session));
    const auto& declared = session->module.loaded->outputs;
    if (output_count != declared.size()) {
      return kiln::invalid_argument("the module has {} output(s), got {} output buffer(s)",
                                    declared.size(), output_count);
    }
    if (output_count > 0 && outputs == nullptr) return kiln::invalid_argument("outputs is null");
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                          input_tensors(*session, inputs, input_count));
    std::vector<Tensor> targets;
    for (size_t i = 0; i < output_count; ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor target, kiln::capi::writable_tensor_from_c(
                                               outputs[i], describe("output", i, declared)));
      targets.push_back(std::move(target));
    }
    return session->session->run_into(tensors, targets);
  });
}

kiln_status* kiln_session_output_dims(kiln_session* session, const kiln_tensor* inputs,
                                      size_t input_count, size_t index, int64_t* dims,
                                      size_t max_rank, size_t* out_rank) {
  return guarded([&]() -> Status {
    KILN_RETURN_IF_ERROR(check_session(session));
    if (out_rank == nullptr) return kiln::invalid_argument("out_rank is null");
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                          input_tensors(*session, inputs, input_count));
    const size_t outputs = session->module.loaded->outputs.size();
    if (index >= outputs) {
      return kiln::out_of_range("output {} does not exist: the module has {}", index, outputs);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::ConcreteShape> shapes,
                          session->session->output_shapes(tensors));
    const kiln::ConcreteShape& shape = shapes[index];
    if (shape.size() > max_rank) {
      return kiln::out_of_range("output {} has rank {}, over max_rank {}", index, shape.size(),
                                max_rank);
    }
    if (!shape.empty() && dims == nullptr) return kiln::invalid_argument("dims is null");
    std::copy(shape.begin(), shape.end(), dims);
    *out_rank = shape.size();
    return kiln::ok_status();
  });
}

}  // extern "C"
