/* Runs a compiled kiln module from C through libkiln_runtime.so: lists its inputs and outputs
 * with their symbolic dims, binds each symbol from a NAME=VALUE argument (1 by default), reads
 * each input from a raw file given as @PATH (in input order; zeros when none is given), runs, and
 * writes each output as raw bytes to PREFIX<index>.bin with --out PREFIX.
 *
 *   run_module model.kmod N=3 @input.bin --out out_
 *
 * Build it against an installed kiln with CMake (find_package(kiln), this folder's
 * CMakeLists.txt) or with pkg-config: cc run_module.c $(pkg-config --cflags --libs kiln_runtime) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

enum { kMaxInputs = 16, kMaxSymbols = 16, kMaxRank = 8 };

struct symbol {
  const char* name;
  size_t name_length;
  int64_t value;
};

static int check(kiln_status* status, const char* what) {
  if (status == NULL) return 1;
  fprintf(stderr, "%s: %s (%s)\n", what, kiln_status_message(status),
          kiln_status_code_name(kiln_status_get_code(status)));
  kiln_status_release(status);
  return 0;
}

static void print_value(const char* role, size_t index, const kiln_value_info* info) {
  printf("%s %zu '%s' %s [", role, index, info->name, kiln_dtype_name(info->dtype));
  for (size_t d = 0; d < info->rank; ++d) printf("%s%s", d ? "," : "", info->dim_names[d]);
  printf("]\n");
}

/* The size of a dim: its static size, else the symbol's value (a compound expression such as
 * "2*N" is not evaluated by this example). */
static int64_t dim_size(const kiln_value_info* info, size_t d, const struct symbol* symbols,
                        size_t symbol_count) {
  if (info->dims[d] >= 0) return info->dims[d];
  for (size_t s = 0; s < symbol_count; ++s) {
    if (strlen(info->dim_names[d]) == symbols[s].name_length &&
        strncmp(info->dim_names[d], symbols[s].name, symbols[s].name_length) == 0) {
      return symbols[s].value;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODULE [SYMBOL=VALUE...] [@INPUT...] [--out PREFIX]\n", argv[0]);
    return 2;
  }
  struct symbol symbols[kMaxSymbols];
  size_t symbol_count = 0;
  const char* files[kMaxInputs];
  size_t file_count = 0;
  const char* out_prefix = NULL;
  for (int a = 2; a < argc; ++a) {
    const char* eq = strchr(argv[a], '=');
    if (strcmp(argv[a], "--out") == 0 && a + 1 < argc) {
      out_prefix = argv[++a];
    } else if (argv[a][0] == '@' && file_count < kMaxInputs) {
      files[file_count++] = argv[a] + 1;
    } else if (eq != NULL && symbol_count < kMaxSymbols) {
      symbols[symbol_count++] = (struct symbol){argv[a], (size_t)(eq - argv[a]), atoll(eq + 1)};
    } else {
      fprintf(stderr, "unexpected argument '%s'\n", argv[a]);
      return 2;
    }
  }

  kiln_module* module = NULL;
  if (!check(kiln_module_load_file(argv[1], NULL, &module), "loading the module")) return 1;
  kiln_session* session = NULL;
  if (!check(kiln_session_create(module, NULL, &session), "creating a session")) return 1;
  printf("kiln %s, module '%s'\n", kiln_version(), kiln_module_name(module));

  size_t input_count = kiln_module_input_count(module);
  if (input_count > kMaxInputs) input_count = kMaxInputs;
  kiln_tensor inputs[kMaxInputs];
  int64_t dims[kMaxInputs][kMaxRank];
  int ok = 1;
  for (size_t i = 0; i < input_count && ok; ++i) {
    kiln_value_info info;
    ok = check(kiln_module_input_info(module, i, &info), "describing an input");
    if (!ok) break;
    print_value("input", i, &info);
    size_t bytes = kiln_dtype_size(info.dtype);
    for (size_t d = 0; d < info.rank && d < kMaxRank; ++d) {
      dims[i][d] = dim_size(&info, d, symbols, symbol_count);
      bytes *= (size_t)dims[i][d];
    }
    void* data = calloc(bytes ? bytes : 1, 1);
    if (i < file_count) {
      FILE* f = fopen(files[i], "rb");
      if (f == NULL || fread(data, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot read %zu bytes for input '%s' from %s\n", bytes, info.name,
                files[i]);
        ok = 0;
      }
      if (f != NULL) fclose(f);
    }
    inputs[i] = (kiln_tensor){info.dtype, info.rank, dims[i], data};
  }

  kiln_outputs* outputs = NULL;
  if (ok) ok = check(kiln_session_run(session, inputs, input_count, &outputs), "running");
  for (size_t o = 0; ok && o < kiln_outputs_count(outputs); ++o) {
    kiln_value_info info;
    ok = check(kiln_module_output_info(module, o, &info), "describing an output");
    if (!ok) break;
    print_value("output", o, &info);
    const kiln_tensor* t = kiln_outputs_get(outputs, o);
    size_t bytes = kiln_dtype_size(t->dtype);
    printf("  computed [");
    for (size_t d = 0; d < t->rank; ++d) {
      printf("%s%lld", d ? "," : "", (long long)t->dims[d]);
      bytes *= (size_t)t->dims[d];
    }
    printf("]\n");
    if (out_prefix != NULL) {
      char path[4096];
      snprintf(path, sizeof path, "%s%zu.bin", out_prefix, o);
      FILE* f = fopen(path, "wb");
      if (f == NULL || fwrite(t->data, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot write %s\n", path);
        ok = 0;
      }
      if (f != NULL) fclose(f);
    }
  }
  kiln_outputs_release(outputs);
  for (size_t i = 0; i < input_count; ++i) free(inputs[i].data);
  kiln_session_release(session);
  kiln_module_release(module);
  return ok ? 0 : 1;
}
