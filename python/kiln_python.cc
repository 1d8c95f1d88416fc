// kiln._kiln: the Python extension behind the `kiln` package, a thin layer over kiln's C API
// (include/kiln/kiln.h, libkiln.so). It is the Python boundary, so it may throw: every kiln
// status becomes the kiln.KilnError subclass of its code (kiln/_errors.py), carrying kiln's
// message. Inputs are read in place (no copy) and outputs come back without a copy: numpy arrays
// whose base is a capsule that owns the run's kiln_outputs. The GIL is released while kiln works.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"

namespace py = pybind11;

namespace {

// ---- Errors -------------------------------------------------------------------------------------

// Raises the kiln.KilnError subclass for `code` (kiln._errors.error_from_status builds it).
[[noreturn]] void raise_kiln_error(int code, const std::string& message) {
  py::object error = py::module_::import("kiln._errors").attr("error_from_status")(code, message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

[[noreturn]] void raise_invalid_argument(const std::string& message) {
  raise_kiln_error(KILN_INVALID_ARGUMENT, message);
}

// Takes ownership of `status`; raises when it is an error. Call with the GIL held.
void check(kiln_status* status) {
  if (status == nullptr) return;
  const int code = kiln_status_get_code(status);
  std::string message = kiln_status_message(status);
  kiln_status_release(status);
  raise_kiln_error(code, message);
}

// ---- Element types ------------------------------------------------------------------------------

// kiln dtype code -> numpy dtype, made once (bf16 has no numpy dtype: none).
struct DTypeTable {
  std::array<PyObject*, 14> numpy{};  // strong references kept for the process's life
};

const DTypeTable& dtype_table() {
  static const DTypeTable* table = [] {
    auto* t = new DTypeTable();
    const std::pair<kiln_dtype, const char*> names[] = {
        {KILN_F32, "float32"}, {KILN_F64, "float64"}, {KILN_F16, "float16"}, {KILN_I64, "int64"},
        {KILN_I32, "int32"},   {KILN_I8, "int8"},     {KILN_U8, "uint8"},    {KILN_BOOL, "bool"},
        {KILN_I16, "int16"},   {KILN_U16, "uint16"},  {KILN_U32, "uint32"},  {KILN_U64, "uint64"}};
    for (const auto& [code, name] : names) {
      t->numpy[code] = py::dtype(name).release().ptr();
    }
    return t;
  }();
  return *table;
}

// The numpy dtype of output `index` ('name'); raises for a kiln dtype numpy lacks (bf16).
py::dtype numpy_dtype(kiln_dtype dtype, size_t index, const std::string& name) {
  const auto& table = dtype_table();
  if (dtype <= 0 || static_cast<size_t>(dtype) >= table.numpy.size() ||
      table.numpy[dtype] == nullptr) {
    raise_kiln_error(KILN_UNIMPLEMENTED, "output " + std::to_string(index) + " '" + name +
                                             "': kiln dtype " + kiln_dtype_name(dtype) +
                                             " has no numpy dtype");
  }
  return py::reinterpret_borrow<py::dtype>(table.numpy[dtype]);
}

// numpy dtype -> kiln dtype; false when numpy's type has no kiln twin (or is not native order).
bool kiln_dtype_of(const py::dtype& dtype, kiln_dtype* out) {
  const char order = dtype.byteorder();
  constexpr char kForeign = (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) ? '>' : '<';
  if (order == kForeign) return false;
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  switch (kind) {
    case 'f':
      if (size == 4) *out = KILN_F32;
      if (size == 8) *out = KILN_F64;
      if (size == 2) *out = KILN_F16;
      return size == 2 || size == 4 || size == 8;
    case 'i':
    case 'u': {
      const bool s = kind == 'i';
      switch (size) {
        case 1: *out = s ? KILN_I8 : KILN_U8; return true;
        case 2: *out = s ? KILN_I16 : KILN_U16; return true;
        case 4: *out = s ? KILN_I32 : KILN_U32; return true;
        case 8: *out = s ? KILN_I64 : KILN_U64; return true;
        default: return false;
      }
    }
    case 'b': *out = KILN_BOOL; return size == 1;
    default: return false;
  }
}

std::string describe_input(size_t index, const char* name) {
  return "input " + std::to_string(index) + " '" + name + "'";
}

// One caller array as a kiln tensor: kept alive (and its dims) while kiln reads it.
struct BoundTensor {
  py::array array;
  std::vector<int64_t> dims;
};

// Checks `object` as the `index`-th input (a C-contiguous numpy array of a kiln dtype) and fills
// `bound`. Anything that is not an ndarray goes through numpy.asarray first.
void bind_input(py::handle object, size_t index, const char* name, BoundTensor* bound,
                kiln_tensor* tensor) {
  py::array array;
  if (py::isinstance<py::array>(object)) {
    array = py::reinterpret_borrow<py::array>(object);
  } else {
    array = py::array::ensure(object);  // numpy.asarray; empty when numpy cannot convert it
    if (!array) {
      raise_invalid_argument(describe_input(index, name) + ": expected a numpy array, got " +
                             std::string(py::str(py::type::of(object).attr("__name__"))));
    }
  }
  kiln_dtype dtype{};
  if (!kiln_dtype_of(array.dtype(), &dtype)) {
    raise_invalid_argument(describe_input(index, name) + ": numpy dtype " +
                           std::string(py::str(array.dtype())) +
                           " has no kiln dtype (float16/32/64, int8/16/32/64, "
                           "uint8/16/32/64 or bool, in native byte order)");
  }
  if (!(array.flags() & py::array::c_style)) {
    raise_invalid_argument(describe_input(index, name) +
                           ": the array is not C-contiguous (strides " +
                           std::string(py::str(py::tuple(array.attr("strides")))) +
                           "); pass numpy.ascontiguousarray(...) of it");
  }
  bound->dims.assign(array.shape(), array.shape() + array.ndim());
  tensor->dtype = dtype;
  tensor->rank = static_cast<size_t>(array.ndim());
  tensor->dims = bound->dims.data();
  // kiln only reads inputs; the C struct has one non-const pointer for inputs and outputs.
  tensor->data = const_cast<void*>(array.data());
  bound->array = std::move(array);
}

// ---- Outputs ------------------------------------------------------------------------------------

// The run's outputs as numpy arrays sharing kiln's memory: every array's base is one capsule
// that releases the kiln_outputs when the last array goes.
py::list wrap_outputs(kiln_outputs* outputs, const std::vector<std::string>& names) {
  py::capsule owner(outputs, [](void* p) { kiln_outputs_release(static_cast<kiln_outputs*>(p)); });
  const size_t count = kiln_outputs_count(outputs);
  py::list result(count);
  for (size_t i = 0; i < count; ++i) {
    const kiln_tensor* t = kiln_outputs_get(outputs, i);
    py::dtype dtype = numpy_dtype(t->dtype, i, names[i]);
    std::vector<py::ssize_t> shape(t->dims, t->dims + t->rank);
    if (t->data == nullptr) {  // an empty tensor: numpy needs memory of its own
      result[i] = py::array(dtype, shape);
    } else {
      result[i] = py::array(dtype, shape, {}, t->data, owner);
    }
  }
  return result;
}

// ---- Value infos --------------------------------------------------------------------------------

struct ValueInfo {
  std::string name;
  py::object dtype;  // numpy dtype, None for bf16
  std::string dtype_name;
  py::list shape;  // int for a static dim, the symbolic expression (str) for a dynamic one
};

ValueInfo make_value_info(const kiln_value_info& info) {
  ValueInfo v;
  v.name = info.name;
  v.dtype_name = kiln_dtype_name(info.dtype);
  const auto& table = dtype_table();
  if (info.dtype > 0 && static_cast<size_t>(info.dtype) < table.numpy.size() &&
      table.numpy[info.dtype] != nullptr) {
    v.dtype = py::reinterpret_borrow<py::object>(table.numpy[info.dtype]);
  } else {
    v.dtype = py::none();
  }
  for (size_t d = 0; d < info.rank; ++d) {
    if (info.dims[d] >= 0) {
      v.shape.append(py::int_(info.dims[d]));
    } else {
      v.shape.append(py::str(info.dim_names[d]));
    }
  }
  return v;
}

// ---- Session ------------------------------------------------------------------------------------

struct ModuleDeleter {
  void operator()(kiln_module* m) const { kiln_module_release(m); }
};
struct SessionDeleter {
  void operator()(kiln_session* s) const { kiln_session_release(s); }
};

bool is_path(py::handle object) {
  return py::isinstance<py::str>(object) || py::hasattr(object, "__fspath__");
}

std::string fspath(py::handle object) {
  return py::module_::import("os").attr("fsencode")(object).cast<std::string>();
}

class Session {
 public:
  Session(py::object module, const std::string& device, int threads, bool trust_module,
          uint64_t max_memory_bytes)
      : device_(device), threads_(threads) {
    if (threads < 0) {
      raise_invalid_argument("threads must be 0 (all cores) or more, got " +
                             std::to_string(threads));
    }
    kiln_load_options load{};
    load.trust_module = trust_module ? 1 : 0;
    kiln_module* loaded = nullptr;
    kiln_status* status = nullptr;
    if (is_path(module)) {
      const std::string path = fspath(module);
      py::gil_scoped_release unlocked;
      status = kiln_module_load_file(path.c_str(), &load, &loaded);
    } else {
      py::buffer_info bytes;
      try {
        bytes = py::buffer(module).request();
      } catch (py::error_already_set&) {
        throw py::type_error("kiln.Session: module must be a path or bytes, got " +
                             std::string(py::str(py::type::of(module).attr("__name__"))));
      }
      py::gil_scoped_release unlocked;
      status = kiln_module_load_memory(bytes.ptr, static_cast<size_t>(bytes.size * bytes.itemsize),
                                       &load, &loaded);
    }
    check(status);
    std::unique_ptr<kiln_module, ModuleDeleter> owned(loaded);

    kiln_session_options options{};
    options.device = device_.c_str();
    options.threads = threads;
    options.max_memory_bytes = max_memory_bytes;
    kiln_session* session = nullptr;
    check(kiln_session_create(owned.get(), &options, &session));
    session_.reset(session);

    const kiln_module* m = kiln_session_module(session);
    name_ = kiln_module_name(m);
    for (size_t i = 0, n = kiln_module_input_count(m); i < n; ++i) {
      kiln_value_info info{};
      check(kiln_module_input_info(m, i, &info));
      inputs_.push_back(make_value_info(info));
      input_names_.push_back(info.name);
      input_keys_.append(py::str(info.name));
    }
    for (size_t i = 0, n = kiln_module_output_count(m); i < n; ++i) {
      kiln_value_info info{};
      check(kiln_module_output_info(m, i, &info));
      outputs_.push_back(make_value_info(info));
      output_names_.push_back(info.name);
    }
  }

  // inputs: a list/tuple in the module's input order, or a dict by input name.
  py::list run(py::handle inputs) {
    const size_t expected = input_names_.size();
    std::vector<BoundTensor> bound;
    std::vector<kiln_tensor> tensors;
    if (py::isinstance<py::dict>(inputs)) {
      auto feed = py::reinterpret_borrow<py::dict>(inputs);
      bound.resize(expected);
      tensors.resize(expected);
      size_t matched = 0;
      for (size_t i = 0; i < expected; ++i) {
        PyObject* value = PyDict_GetItemWithError(feed.ptr(), input_keys_[i].ptr());
        if (value == nullptr) {
          if (PyErr_Occurred()) throw py::error_already_set();
          raise_invalid_argument(describe_input(i, input_names_[i].c_str()) +
                                 " is missing from the inputs (given: " + keys_of(feed) + ")");
        }
        bind_input(value, i, input_names_[i].c_str(), &bound[i], &tensors[i]);
        ++matched;
      }
      if (matched != static_cast<size_t>(py::len(feed))) {
        for (auto item : feed) {
          bool known = false;
          for (const auto& name : input_names_) {
            if (py::str(item.first).equal(py::str(name))) known = true;
          }
          if (!known) {
            raise_kiln_error(KILN_NOT_FOUND, "the module has no input " +
                                                 std::string(py::repr(item.first)) +
                                                 " (its inputs: " + input_list() + ")");
          }
        }
      }
    } else if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
      auto seq = py::reinterpret_borrow<py::sequence>(inputs);
      const size_t given = py::len(seq);
      if (given != expected) {
        raise_invalid_argument("the module has " + std::to_string(expected) + " input(s) (" +
                               input_list() + "), got " + std::to_string(given) + " array(s)");
      }
      bound.resize(given);
      tensors.resize(given);
      for (size_t i = 0; i < given; ++i) {
        bind_input(seq[i], i, input_names_[i].c_str(), &bound[i], &tensors[i]);
      }
    } else {
      throw py::type_error(
          "Session.run: inputs must be a list of arrays (in the module's input order) or a dict "
          "by input name, got " +
          std::string(py::str(py::type::of(inputs).attr("__name__"))));
    }

    kiln_outputs* outputs = nullptr;
    kiln_status* status = nullptr;
    {
      py::gil_scoped_release unlocked;
      status = kiln_session_run(session_.get(), tensors.data(), tensors.size(), &outputs);
    }
    check(status);
    return wrap_outputs(outputs, output_names_);
  }

  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  const std::string& name() const { return name_; }
  const std::string& device() const { return device_; }
  int threads() const { return threads_; }

 private:
  std::string input_list() const {
    std::string list;
    for (const auto& name : input_names_) list += (list.empty() ? "'" : ", '") + name + "'";
    return list;
  }
  static std::string keys_of(const py::dict& feed) {
    std::string list;
    for (auto item : feed) {
      if (!list.empty()) list.append(", ");
      list.append(py::repr(item.first).cast<std::string>());
    }
    return list;
  }

  std::unique_ptr<kiln_session, SessionDeleter> session_;
  std::string device_;
  int threads_ = 0;
  std::string name_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<std::string> input_names_, output_names_;
  py::list input_keys_;
};

// ---- Compiling ----------------------------------------------------------------------------------

struct CompileOptions {
  std::vector<std::string> bind;
  std::vector<const char*> bind_ptrs;
  std::string target;
  kiln_compile_options c{};

  CompileOptions(std::vector<std::string> b, std::string t, int64_t opset)
      : bind(std::move(b)), target(std::move(t)) {
    for (const auto& s : bind) bind_ptrs.push_back(s.c_str());
    c.bind = bind_ptrs.data();
    c.bind_count = bind_ptrs.size();
    c.target = target.c_str();
    c.opset_version = opset;
  }
};

void compile_file(py::handle model_path, py::handle module_path, std::vector<std::string> bind,
                  std::string target, int64_t opset_version) {
  const std::string model = fspath(model_path);
  const std::string module = fspath(module_path);
  CompileOptions options(std::move(bind), std::move(target), opset_version);
  kiln_status* status = nullptr;
  {
    py::gil_scoped_release unlocked;
    status = kiln_compile_file(model.c_str(), module.c_str(), &options.c);
  }
  check(status);
}

py::bytes compile_memory(py::buffer model, std::vector<std::string> bind, std::string target,
                         int64_t opset_version) {
  py::buffer_info data = model.request();
  CompileOptions options(std::move(bind), std::move(target), opset_version);
  kiln_bytes module{};
  kiln_status* status = nullptr;
  {
    py::gil_scoped_release unlocked;
    status = kiln_compile_memory(data.ptr, static_cast<size_t>(data.size * data.itemsize),
                                 &options.c, &module);
  }
  check(status);
  py::bytes result(static_cast<const char*>(module.data), module.size);
  kiln_bytes_release(&module);
  return result;
}

// ---- Comparing ----------------------------------------------------------------------------------

py::tuple compare(py::array actual, py::array expected, double atol, double rtol, bool nan_equal) {
  BoundTensor bound[2];
  kiln_tensor tensors[2];
  bind_input(actual, 0, "actual", &bound[0], &tensors[0]);
  bind_input(expected, 1, "expected", &bound[1], &tensors[1]);
  kiln_compare_result result{};
  char* report = nullptr;
  kiln_status* status = nullptr;
  {
    py::gil_scoped_release unlocked;
    status =
        kiln_compare(&tensors[0], &tensors[1], atol, rtol, nan_equal ? 1 : 0, &result, &report);
  }
  check(status);
  std::string line = report != nullptr ? report : "";
  kiln_string_release(report);
  py::dict figures;
  figures["count"] = result.count;
  figures["mismatches"] = result.mismatches;
  figures["nan_mismatches"] = result.nan_mismatches;
  figures["inf_mismatches"] = result.inf_mismatches;
  figures["max_abs_error"] = result.max_abs_error;
  figures["max_rel_error"] = result.max_rel_error;
  figures["first_mismatch"] = result.first_mismatch;
  return py::make_tuple(figures, line);
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's C API for Python (use the kiln package, not this module)";
  m.def("version", [] { return std::string(kiln_version()); });
  m.def("device_names", [] { return std::string(kiln_device_names()); });
  m.def("status_code_name",
        [](int code) { return std::string(kiln_status_code_name(kiln_status_code(code))); });

  py::class_<ValueInfo>(m, "ValueInfo",
                        "A module input or output: name, numpy dtype, shape (int for a static "
                        "dim, the symbolic expression as a str for a dynamic one).")
      .def_readonly("name", &ValueInfo::name)
      .def_readonly("dtype", &ValueInfo::dtype)
      .def_readonly("dtype_name", &ValueInfo::dtype_name)
      .def_readonly("shape", &ValueInfo::shape)
      .def("__repr__", [](const ValueInfo& v) {
        return "ValueInfo(name=" + std::string(py::repr(py::str(v.name))) +
               ", dtype=" + v.dtype_name + ", shape=" + std::string(py::repr(v.shape)) + ")";
      });

  py::class_<Session>(m, "Session")
      .def(py::init<py::object, const std::string&, int, bool, uint64_t>(), py::arg("module"),
           py::arg("device") = "cpu", py::arg("threads") = 0, py::arg("trust_module") = false,
           py::arg("max_memory_bytes") = 0)
      .def("run", &Session::run, py::arg("inputs"))
      .def_property_readonly("inputs", &Session::inputs)
      .def_property_readonly("outputs", &Session::outputs)
      .def_property_readonly("name", &Session::name)
      .def_property_readonly("device", &Session::device)
      .def_property_readonly("threads", &Session::threads)
      .def("__repr__", [](const Session& s) {
        auto describe = [](const std::vector<ValueInfo>& values) {
          std::string out;
          for (const auto& v : values) {
            if (!out.empty()) out.append(", ");
            out.append(v.name).append(": ").append(v.dtype_name);
            out.append(py::repr(v.shape).cast<std::string>());
          }
          return out;
        };
        return "<kiln.Session " + std::string(py::repr(py::str(s.name()))) + " on " + s.device() +
               ": " + describe(s.inputs()) + " -> " + describe(s.outputs()) + ">";
      });

  m.def("compile_file", &compile_file, py::arg("model_path"), py::arg("module_path"),
        py::arg("bind"), py::arg("target"), py::arg("opset_version"));
  m.def("compile_memory", &compile_memory, py::arg("model"), py::arg("bind"), py::arg("target"),
        py::arg("opset_version"));
  m.def("compare", &compare, py::arg("actual"), py::arg("expected"), py::arg("atol"),
        py::arg("rtol"), py::arg("nan_equal"));
}
