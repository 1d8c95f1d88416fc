/* The C side of bench/python_overhead.py: kiln_session_run called from C in a timed loop, in the
 * same process as the Python calls it is compared with (the script loads this library with
 * ctypes, after `import kiln` loaded libkiln.so, so both sides use one libkiln.so).
 *
 *   void* kiln_timing_open(const char* module_path, int threads, char* error, size_t size);
 *   double kiln_timing_run(void* handle, int dtype, const int64_t* dims, size_t rank,
 *                          void* data, int64_t runs);   ns per call, or -1 (error)
 *   const char* kiln_timing_error(void* handle);
 *   void kiln_timing_close(void* handle);
 *
 * One call of the loop is what Session.run does for the caller: kiln_session_run on one input,
 * then the outputs released. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"

typedef struct kiln_timing {
  kiln_session* session;
  char error[1024];
} kiln_timing;

static void keep_error(kiln_timing* timing, kiln_status* status) {
  snprintf(timing->error, sizeof(timing->error), "%s", kiln_status_message(status));
  kiln_status_release(status);
}

void* kiln_timing_open(const char* module_path, int threads, char* error, size_t size) {
  kiln_module* module = NULL;
  kiln_status* status = kiln_module_load_file(module_path, NULL, &module);
  if (status != NULL) {
    snprintf(error, size, "%s", kiln_status_message(status));
    kiln_status_release(status);
    return NULL;
  }
  kiln_session_options options;
  memset(&options, 0, sizeof(options));
  options.device = "cpu";
  options.threads = threads;
  kiln_session* session = NULL;
  status = kiln_session_create(module, &options, &session);
  kiln_module_release(module);
  if (status != NULL) {
    snprintf(error, size, "%s", kiln_status_message(status));
    kiln_status_release(status);
    return NULL;
  }
  kiln_timing* timing = calloc(1, sizeof(kiln_timing));
  if (timing == NULL) {
    kiln_session_release(session);
    snprintf(error, size, "out of memory");
    return NULL;
  }
  timing->session = session;
  return timing;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double kiln_timing_run(void* handle, int dtype, const int64_t* dims, size_t rank, void* data,
                       int64_t runs) {
  kiln_timing* timing = (kiln_timing*)handle;
  kiln_tensor input;
  input.dtype = (kiln_dtype)dtype;
  input.rank = rank;
  input.dims = dims;
  input.data = data;
  const double start = now_ns();
  for (int64_t i = 0; i < runs; ++i) {
    kiln_outputs* outputs = NULL;
    kiln_status* status = kiln_session_run(timing->session, &input, 1, &outputs);
    if (status != NULL) {
      keep_error(timing, status);
      return -1;
    }
    kiln_outputs_release(outputs);
  }
  return (now_ns() - start) / (double)runs;
}

const char* kiln_timing_error(void* handle) { return ((kiln_timing*)handle)->error; }

void kiln_timing_close(void* handle) {
  kiln_timing* timing = (kiln_timing*)handle;
  if (timing == NULL) return;
  kiln_session_release(timing->session);
  free(timing);
}
