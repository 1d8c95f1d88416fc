/* Many C threads sharing one loaded module and one session (include/kiln/kiln.h promises it):
 * each thread makes RUNS runs at mixed batch sizes, alternating kiln_session_run and
 * kiln_session_run_into, and every output must equal bit for bit the output a single-threaded
 * run gave for the same input. Links libkiln_runtime.so only; also built with ThreadSanitizer by
 * `make sanitize`.
 *
 * usage: c_threads_test MODULE INPUT_B3 [THREADS [RUNS]]
 *   MODULE    tiny_cnn compiled with a dynamic batch (data [N,3,8,8] f32 -> prob [N,10])
 *   INPUT_B3  3x3x8x8 f32 raw input (the first samples serve the smaller batches) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

enum { kMaxBatch = 3, kSample = 3 * 8 * 8, kClasses = 10, kMaxThreads = 64 };

static kiln_session* session;
static float input[kMaxBatch * kSample];
static float expected[kMaxBatch + 1][kMaxBatch * kClasses]; /* by batch size */
static int runs_per_thread = 200;

struct worker {
  int index;
  int failures;
  char first_error[512];
};

static void fail(struct worker* w, const char* what) {
  if (w->failures++ == 0) snprintf(w->first_error, sizeof w->first_error, "%s", what);
}

static int run_batch(int batch, float* out, int into, char* error, size_t error_size) {
  int64_t dims[4] = {batch, 3, 8, 8};
  kiln_tensor in = {KILN_F32, 4, dims, input};
  kiln_status* status;
  if (into) {
    int64_t out_dims[2] = {batch, kClasses};
    kiln_tensor target = {KILN_F32, 2, out_dims, out};
    status = kiln_session_run_into(session, &in, 1, &target, 1);
  } else {
    kiln_outputs* outputs = NULL;
    status = kiln_session_run(session, &in, 1, &outputs);
    if (status == NULL) {
      const kiln_tensor* prob = kiln_outputs_get(outputs, 0);
      memcpy(out, prob->data, sizeof(float) * (size_t)batch * kClasses);
      kiln_outputs_release(outputs);
    }
  }
  if (status != NULL) {
    snprintf(error, error_size, "batch %d: %s", batch, kiln_status_message(status));
    kiln_status_release(status);
    return 0;
  }
  return 1;
}

static void* work(void* arg) {
  struct worker* w = arg;
  float out[kMaxBatch * kClasses];
  char error[512];
  for (int i = 0; i < runs_per_thread; ++i) {
    int batch = 1 + (w->index + i) % kMaxBatch;
    if (!run_batch(batch, out, (i / kMaxBatch) % 2, error, sizeof error)) {
      fail(w, error);
      continue;
    }
    if (memcmp(out, expected[batch], sizeof(float) * (size_t)batch * kClasses) != 0) {
      snprintf(error, sizeof error, "run %d at batch %d differs from the single-threaded run", i,
               batch);
      fail(w, error);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODULE INPUT_B3 [THREADS [RUNS]]\n", argv[0]);
    return 2;
  }
  int threads = argc > 3 ? atoi(argv[3]) : 8;
  if (argc > 4) runs_per_thread = atoi(argv[4]);
  if (threads < 1 || threads > kMaxThreads || runs_per_thread < 1) {
    fprintf(stderr, "bad THREADS or RUNS\n");
    return 2;
  }
  FILE* f = fopen(argv[2], "rb");
  if (f == NULL || fread(input, sizeof(float), kMaxBatch * kSample, f) != kMaxBatch * kSample) {
    fprintf(stderr, "cannot read %d floats from %s\n", kMaxBatch * kSample, argv[2]);
    return 2;
  }
  fclose(f);
  kiln_module* module = NULL;
  kiln_status* status = kiln_module_load_file(argv[1], NULL, &module);
  if (status == NULL) {
    /* One core per run: the threads themselves are the parallelism here. */
    kiln_session_options options = {"cpu", 1, 0};
    status = kiln_session_create(module, &options, &session);
  }
  if (status != NULL) {
    fprintf(stderr, "%s\n", kiln_status_message(status));
    return 1;
  }
  char error[512];
  for (int batch = 1; batch <= kMaxBatch; ++batch) {
    if (!run_batch(batch, expected[batch], 0, error, sizeof error)) {
      fprintf(stderr, "single-threaded %s\n", error);
      return 1;
    }
  }
  pthread_t ids[kMaxThreads];
  struct worker workers[kMaxThreads];
  for (int t = 0; t < threads; ++t) {
    workers[t] = (struct worker){t, 0, ""};
    if (pthread_create(&ids[t], NULL, work, &workers[t]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  int failures = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    if (workers[t].failures > 0) {
      fprintf(stderr, "thread %d: %d failure(s), first: %s\n", t, workers[t].failures,
              workers[t].first_error);
      failures += workers[t].failures;
    }
  }
  kiln_session_release(session);
  kiln_module_release(module);
  printf("%d threads x %d runs at batch 1..%d: %s\n", threads, runs_per_thread, kMaxBatch,
         failures == 0 ? "every output equal bit for bit to the single-threaded run" : "FAILED");
  return failures == 0 ? 0 : 1;
}
