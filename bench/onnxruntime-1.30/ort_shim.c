/* Shim: exposes the VERS_1.29.0 symbols that the 1.29 libonnxruntime4j_jni.so
 * needs and forwards them to the real ONNX Runtime 1.30.0 library, which is
 * dlopen()ed from the shim's own directory as libonnxruntime-1.30.0.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAL_LIB_NAME "libonnxruntime-1.30.0.so"
#define REAL_VERSION  "VERS_1.30.0"

typedef const void *(*get_api_base_fn)(void);
typedef void *(*append_cpu_fn)(void *options, int use_arena);

static void *g_handle;
static get_api_base_fn g_get_api_base;
static append_cpu_fn g_append_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void *find_sym(const char *name) {
  void *p = dlvsym(g_handle, name, REAL_VERSION);
  if (!p) p = dlsym(g_handle, name);
  if (!p) fprintf(stderr, "ort_shim: symbol %s not found: %s\n", name, dlerror());
  return p;
}

static void shim_init(void) {
  Dl_info info;
  char path[PATH_MAX];
  if (!dladdr((void *)&shim_init, &info) || !info.dli_fname) {
    fprintf(stderr, "ort_shim: dladdr failed\n");
    return;
  }
  const char *slash = strrchr(info.dli_fname, '/');
  size_t dirlen = slash ? (size_t)(slash - info.dli_fname) : 0;
  if (slash)
    snprintf(path, sizeof path, "%.*s/%s", (int)dirlen, info.dli_fname, REAL_LIB_NAME);
  else
    snprintf(path, sizeof path, "./%s", REAL_LIB_NAME);
  g_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!g_handle) {
    fprintf(stderr, "ort_shim: dlopen(%s) failed: %s\n", path, dlerror());
    return;
  }
  g_get_api_base = (get_api_base_fn)find_sym("OrtGetApiBase");
  g_append_cpu = (append_cpu_fn)find_sym("OrtSessionOptionsAppendExecutionProvider_CPU");
}

/* Returns const OrtApiBase* */
const void *OrtGetApiBase(void) {
  pthread_once(&g_once, shim_init);
  return g_get_api_base ? g_get_api_base() : NULL;
}

/* Returns OrtStatus* (NULL on success) */
void *OrtSessionOptionsAppendExecutionProvider_CPU(void *options, int use_arena) {
  pthread_once(&g_once, shim_init);
  if (!g_append_cpu) {
    fprintf(stderr, "ort_shim: real OrtSessionOptionsAppendExecutionProvider_CPU unavailable\n");
    abort();
  }
  return g_append_cpu(options, use_arena);
}
