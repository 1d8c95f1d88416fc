/* kiln's C API: load a compiled module, run it from any number of threads, compile ONNX models.
 *
 * C99, no C++ types across it. Every object is an opaque handle created by a kiln_* function and
 * released by its kiln_*_release function (releasing NULL does nothing). Every function that can
 * fail returns a kiln_status*: NULL on success, else an object the caller reads
 * (kiln_status_code, kiln_status_message) and releases (kiln_status_release). On failure no
 * output parameter is written.
 *
 * Two libraries implement it:
 *   libkiln_runtime.so  loading and running modules (no protobuf, no compiler linked)
 *   libkiln.so          all of the runtime's functions, plus kiln_compile_* (links the compiler)
 * A program links one of them. Symbols carry the version KILN_1 (ELF symbol versioning).
 *
 * Threads: a kiln_module and a kiln_session are immutable once created and may be shared by any
 * number of threads; kiln_session_run may be called from many threads at once. Each concurrent
 * call runs on its own run state (prepared plans and activation memory, kept for reuse by later
 * calls), so outputs are identical bit for bit to those of the same call made alone. A session's
 * `threads` is the number of cores each of its runs uses, set for the calling thread during the
 * run only (OpenMP's team size is per thread), so two sessions with different thread counts in
 * one process each keep theirs.
 */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* "0.1.0": the library's version (may differ from the header's KILN_VERSION_* macros when a
 * program runs against a newer library). */
KILN_API const char* kiln_version(void);

/* ---- Status ---------------------------------------------------------------------------------- */

typedef enum kiln_status_code {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1,    /* the caller's input (model, module, tensor, option) is wrong */
  KILN_UNIMPLEMENTED = 2,       /* valid input kiln does not support yet */
  KILN_NOT_FOUND = 3,           /* a named file, input or symbol does not exist */
  KILN_OUT_OF_RANGE = 4,        /* a size or index beyond a limit (e.g. the memory limit) */
  KILN_DATA_LOSS = 5,           /* a file is truncated or corrupt */
  KILN_FAILED_PRECONDITION = 6, /* e.g. a module of another format version */
  KILN_INTERNAL = 7             /* a bug in kiln */
} kiln_status_code;

typedef struct kiln_status kiln_status;

KILN_API kiln_status_code kiln_status_get_code(const kiln_status* status); /* KILN_OK for NULL */
/* The full message, e.g. "input 0 'data': expected dtype f32, got i64"; "" for NULL. Valid until
 * the status is released. */
KILN_API const char* kiln_status_message(const kiln_status* status);
/* "INVALID_ARGUMENT" etc. */
KILN_API const char* kiln_status_code_name(kiln_status_code code);
KILN_API void kiln_status_release(kiln_status* status);

/* ---- Element types ----------------------------------------------------------------------------
 * The codes are kiln's module codes and never change. */

typedef enum kiln_dtype {
  KILN_F32 = 1,
  KILN_F64 = 2,
  KILN_F16 = 3,
  KILN_I64 = 4,
  KILN_I32 = 5,
  KILN_I8 = 6,
  KILN_U8 = 7,
  KILN_BOOL = 8, /* one byte, 0 or 1 */
  KILN_I16 = 9,
  KILN_U16 = 10,
  KILN_U32 = 11,
  KILN_U64 = 12,
  KILN_BF16 = 13
} kiln_dtype;

/* Bytes per element; 0 for a code that is no kiln_dtype. */
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);
/* "f32", "i64", "bool", ...; "?" for a code that is no kiln_dtype. */
KILN_API const char* kiln_dtype_name(kiln_dtype dtype);

/* ---- Tensors ----------------------------------------------------------------------------------
 * A dense row-major tensor the caller owns: `dims` has `rank` entries, `data` holds
 * product(dims) * kiln_dtype_size(dtype) bytes. kiln reads inputs in place (no copy) when `data`
 * is aligned to the element size, and copies them otherwise. */

typedef struct kiln_tensor {
  kiln_dtype dtype;
  size_t rank;
  const int64_t* dims;
  void* data;
} kiln_tensor;

/* ---- Modules ----------------------------------------------------------------------------------
 * A compiled module (`kiln compile`, kiln_compile_*), loaded and fully verified. */

typedef struct kiln_module kiln_module;

typedef struct kiln_load_options {
  /* Skip the whole-file checksum (the structure is still verified). 0 by default. */
  int trust_module;
} kiln_load_options;

/* `options` may be NULL (defaults). Errors name the file and what is wrong with it. */
KILN_API kiln_status* kiln_module_load_file(const char* path, const kiln_load_options* options,
                                            kiln_module** out_module);
/* The bytes are copied; the caller may free them when this returns. */
KILN_API kiln_status* kiln_module_load_memory(const void* data, size_t size,
                                              const kiln_load_options* options,
                                              kiln_module** out_module);
KILN_API void kiln_module_release(kiln_module* module);

/* A graph input or output as the module declares it. Every pointer is valid as long as the
 * module (or a session made from it) lives. */
typedef struct kiln_value_info {
  const char* name;
  kiln_dtype dtype;
  size_t rank;
  /* Per dim: its size, or -1 where the size depends on symbols. */
  const int64_t* dims;
  /* Per dim: the expression over the module's symbols ("N", "2*S", "64" for a static dim). */
  const char* const* dim_names;
} kiln_value_info;

KILN_API size_t kiln_module_input_count(const kiln_module* module);
KILN_API size_t kiln_module_output_count(const kiln_module* module);
/* Errors: an index out of range. */
KILN_API kiln_status* kiln_module_input_info(const kiln_module* module, size_t index,
                                             kiln_value_info* out_info);
KILN_API kiln_status* kiln_module_output_info(const kiln_module* module, size_t index,
                                              kiln_value_info* out_info);
/* The model's name as the module records it. */
KILN_API const char* kiln_module_name(const kiln_module* module);

/* ---- Sessions ---------------------------------------------------------------------------------
 * A module on a device, ready to run at any sizes its symbols allow. */

typedef struct kiln_session kiln_session;

typedef struct kiln_session_options {
  const char* device;        /* "cpu" (NULL: "cpu"); kiln_device_names() lists them */
  int threads;               /* cores per run; 0: all */
  uint64_t max_memory_bytes; /* refuse runs needing more activations+outputs; 0: 3/4 of RAM */
} kiln_session_options;

/* The session holds its own reference to the module: the caller may release the module after
 * this returns. `options` may be NULL (defaults). Errors: an unknown device (the message lists
 * them), a negative thread count. */
KILN_API kiln_status* kiln_session_create(const kiln_module* module,
                                          const kiln_session_options* options,
                                          kiln_session** out_session);
KILN_API void kiln_session_release(kiln_session* session);
KILN_API const kiln_module* kiln_session_module(const kiln_session* session);
/* "cpu, null": the devices this library can create, for messages. */
KILN_API const char* kiln_device_names(void);

/* Outputs a run allocated: one tensor per module output, in kiln_module_output_info order. */
typedef struct kiln_outputs kiln_outputs;

KILN_API size_t kiln_outputs_count(const kiln_outputs* outputs);
/* The index-th output; its dims and data live as long as `outputs`. NULL when out of range. */
KILN_API const kiln_tensor* kiln_outputs_get(const kiln_outputs* outputs, size_t index);
KILN_API void kiln_outputs_release(kiln_outputs* outputs);

/* Runs the module on `inputs` (input_count tensors, in kiln_module_input_info order) and returns
 * freshly allocated outputs. Errors name the input and dim that is wrong: count, dtype, rank, a
 * static dim, a symbol bound to two values, a NULL data pointer for a non-empty tensor. Safe to
 * call from many threads at once. */
KILN_API kiln_status* kiln_session_run(kiln_session* session, const kiln_tensor* inputs,
                                       size_t input_count, kiln_outputs** out_outputs);

/* Runs the module and writes its outputs into caller buffers: `outputs` (output_count tensors,
 * one per module output) must have the dtype and dims the outputs have for these inputs
 * (kiln_session_output_dims) and hold that many bytes; kiln writes them in place. Errors name
 * the output whose dtype or dims differ. Safe to call from many threads at once. */
KILN_API kiln_status* kiln_session_run_into(kiln_session* session, const kiln_tensor* inputs,
                                            size_t input_count, kiln_tensor* outputs,
                                            size_t output_count);

/* The dims output `index` has for these inputs, written to dims[0..rank) with its rank in
 * *out_rank (max_rank: the room in `dims`). Errors: inputs that do not fit the module, an
 * output whose size depends on data (known only after a run), rank > max_rank. */
KILN_API kiln_status* kiln_session_output_dims(kiln_session* session, const kiln_tensor* inputs,
                                               size_t input_count, size_t index, int64_t* dims,
                                               size_t max_rank, size_t* out_rank);

/* ---- Comparison -------------------------------------------------------------------------------
 * kiln's one strict comparator: per element, with e = expected and a = actual, a passes iff
 * |a - e| <= atol + rtol * |e| with a finite where e is finite; an infinite e needs the same
 * infinity; a NaN e passes only with nan_equal and a NaN a. NaN or Inf in `actual` never passes
 * by accident, whatever the tolerance. Integers compare exactly as integers. */

typedef struct kiln_compare_result {
  int64_t count;      /* elements compared */
  int64_t mismatches; /* elements that failed */
  int64_t nan_mismatches, inf_mismatches;
  double max_abs_error, max_rel_error; /* over finite pairs */
  int64_t first_mismatch;              /* flat index; -1 when none */
} kiln_compare_result;

/* Compares; `out_result` is filled, and `out_report` (may be NULL) receives a one-line report
 * (release it with kiln_string_release). Errors: dtypes or dims that differ (naming both), a
 * negative or NaN tolerance. Mismatches are no error: read out_result->mismatches. */
KILN_API kiln_status* kiln_compare(const kiln_tensor* actual, const kiln_tensor* expected,
                                   double atol, double rtol, int nan_equal,
                                   kiln_compare_result* out_result, char** out_report);
KILN_API void kiln_string_release(char* string);

/* ---- Compiling (libkiln.so only) --------------------------------------------------------------
 * ONNX model to module, as `kiln compile` does. */

typedef struct kiln_compile_options {
  /* Symbols fixed to values, as `kiln compile --bind`: "N=3" strings, bind_count of them. */
  const char* const* bind;
  size_t bind_count;
  const char* target;    /* NULL: "cpu" */
  int64_t opset_version; /* 0: 17 */
} kiln_compile_options;

/* An owned byte buffer (a module in memory). */
typedef struct kiln_bytes {
  void* data;
  size_t size;
} kiln_bytes;

/* Compiles the .onnx or .kir file at `model_path` and writes the module to `module_path`
 * atomically (nothing is left there on error). `options` may be NULL. */
KILN_API kiln_status* kiln_compile_file(const char* model_path, const char* module_path,
                                        const kiln_compile_options* options);
/* Compiles a serialized ONNX ModelProto held in memory; the module's bytes go to *out_module
 * (release with kiln_bytes_release), ready for kiln_module_load_memory. */
KILN_API kiln_status* kiln_compile_memory(const void* onnx_data, size_t onnx_size,
                                          const kiln_compile_options* options,
                                          kiln_bytes* out_module);
KILN_API void kiln_bytes_release(kiln_bytes* bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_H_ */
