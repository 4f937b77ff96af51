// ortserve's onnxruntime custom-op library: dev.ortserve.GroupQueryAttention, and dev.ortserve.MatMulNBits
// (matmul_nbits.cc).
//
// The same inputs, outputs and attributes as com.microsoft.GroupQueryAttention (query, key, value, past_key,
// past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache; output, present_key, present_value). A step of one
// new position per row (a decode step), or of a few in one row (a speculative verification, each position computed as
// its decode step would be), is computed here, reading each KV head once for all the query heads that share it; every
// other step (a prompt's chunk, a batch of first prompts) is handed to onnxruntime's own GroupQueryAttention through the C API's
// CreateOp / InvokeOp, so prompts run exactly as before. onnxruntime 1.29's CPU kernel reads a KV head once per query
// head, and for a float16 cache widens it to float32 once per query head first (docs/benchmarks.md, "decode
// attention, native"). The decode path keeps the op's semantics: the new key and value written at the row's seqlens_k
// in the present buffer (in place when present and past are one buffer, else the past copied in first), rotary
// embedding on query and key when do_rotary, softmax(softcap(scale q.k)) over the row's positions (its last
// local_window_size with a window), the values weighted by it. Built by src/main/native/build.sh against onnxruntime's
// C API header (Debian's libonnxruntime-dev); the kernel (attend_simd.inc) is compiled for AVX-512 and for AVX2 + FMA +
// F16C, the widest the CPU runs picked per node, portable C++ otherwise (attend_portable below).

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "attend.h"
#include "matmul_nbits.h"

namespace {

const OrtApi* g_api = nullptr;

using half = _Float16;

template <typename KV>
static inline float widen(KV x) { return static_cast<float>(x); }

template <typename KV>
static void attend_portable_typed(const ortserve::AttendArgs& a) {
  const KV* keys = static_cast<const KV*>(a.keys);
  const KV* values = static_cast<const KV*>(a.values);
  for (int g = 0; g < a.group; g++) {
    const float* q = a.q + g * a.dim;
    float* s = a.scores + static_cast<size_t>(g) * a.len;
    for (int j = a.from; j < a.len; j++) {
      float acc = 0.0f;
      for (int d = 0; d < a.dim; d++) acc += q[d] * widen(keys[static_cast<size_t>(j) * a.dim + d]);
      s[j] = acc;
    }
    float inv = ortserve::softmax_row(s, a.from, a.len, a.scale, a.softcap);
    float* out = a.out + g * a.dim;
    for (int d = 0; d < a.dim; d++) out[d] = 0.0f;
    for (int j = a.from; j < a.len; j++) {
      for (int d = 0; d < a.dim; d++) out[d] += s[j] * widen(values[static_cast<size_t>(j) * a.dim + d]);
    }
    for (int d = 0; d < a.dim; d++) out[d] *= inv;
  }
}

template <typename T>
static void rotate(float* x, int dim, int rotary_dim, const T* cos, const T* sin, bool interleaved) {
  int half_dim = rotary_dim / 2;
  if (interleaved) {
    for (int i = 0; i < half_dim; i++) {
      float c = widen(cos[i]), s = widen(sin[i]);
      float a = x[2 * i], b = x[2 * i + 1];
      x[2 * i] = a * c - b * s;
      x[2 * i + 1] = b * c + a * s;
    }
  } else {
    for (int i = 0; i < half_dim; i++) {
      float c = widen(cos[i]), s = widen(sin[i]);
      float a = x[i], b = x[i + half_dim];
      x[i] = a * c - b * s;
      x[i + half_dim] = b * c + a * s;
    }
  }
  (void)dim;
}

struct Attributes {
  int64_t num_heads = 0, kv_num_heads = 0, local_window_size = -1, do_rotary = 0, rotary_interleaved = 0;
  float scale = 0.0f, softcap = 0.0f;
};

template <typename T>
struct DecodeJob {
  const Attributes* a;
  const T* query;        // [rows, 1, (heads [+ 2 kvHeads]) * dim]
  const T* key;          // [rows, 1, kvHeads * dim] or inside query
  const T* value;
  int steps;             // new positions per row (1: a decode step; a few: a speculative verification)
  int64_t q_row_stride;  // elements per row of query (all its new positions)
  int64_t q_step_stride; // elements per new position of query
  int64_t kv_row_stride; // elements per row of key / value
  int64_t kv_step_stride;
  int64_t k_offset, v_offset;  // where a row's key / value starts in its source row
  T* present_key;        // [rows, kvHeads, capacity, dim]
  T* present_value;
  int capacity;
  const int32_t* seqlens;
  const T* cos;          // [max positions, rotary_dim / 2]
  const T* sin;
  int rotary_dim;
  int dim;
  T* output;             // [rows, 1, heads * dim]
  ortserve::AttendFn attend;
};

template <typename T>
static void decode_one(void* data, size_t task) {
  const DecodeJob<T>& job = *static_cast<const DecodeJob<T>*>(data);
  const Attributes& a = *job.a;
  const int kv_heads = static_cast<int>(a.kv_num_heads), group = static_cast<int>(a.num_heads / a.kv_num_heads);
  const int dim = job.dim;
  const int row = static_cast<int>(task / kv_heads), kh = static_cast<int>(task % kv_heads);
  // the row's new positions end at seqlens_k (right padding): total - steps ... total - 1
  const int total = job.seqlens[row] + 1;
  const int first = total - job.steps;
  const float scale = a.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(dim)) : a.scale;

  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(group) * dim * 2 + static_cast<size_t>(group) * total + dim;
  if (scratch.size() < need) scratch.resize(need);
  float* q = scratch.data();
  float* out = q + static_cast<size_t>(group) * dim;
  float* kv = out + static_cast<size_t>(group) * dim;
  float* s = kv + dim;
  const bool rotary = a.do_rotary != 0 && job.cos != nullptr;
  const int half_rotary = job.rotary_dim / 2;
  size_t head_base = (static_cast<size_t>(row) * kv_heads + kh) * job.capacity * dim;

  // the new keys (rotated) and values at their positions first: a later new position attends to the earlier ones
  for (int t = 0; t < job.steps; t++) {
    const int position = first + t;
    T* key_at = job.present_key + head_base + static_cast<size_t>(position) * dim;
    T* value_at = job.present_value + head_base + static_cast<size_t>(position) * dim;
    const T* k_src = job.key + row * job.kv_row_stride + t * job.kv_step_stride + job.k_offset + static_cast<size_t>(kh) * dim;
    const T* v_src = job.value + row * job.kv_row_stride + t * job.kv_step_stride + job.v_offset + static_cast<size_t>(kh) * dim;
    if (rotary) {
      for (int d = 0; d < dim; d++) kv[d] = widen(k_src[d]);
      rotate(kv, dim, job.rotary_dim, job.cos + static_cast<size_t>(position) * half_rotary, job.sin + static_cast<size_t>(position) * half_rotary,
             a.rotary_interleaved != 0);
      for (int d = 0; d < dim; d++) key_at[d] = static_cast<T>(kv[d]);
    } else {
      std::memcpy(key_at, k_src, sizeof(T) * dim);
    }
    std::memcpy(value_at, v_src, sizeof(T) * dim);
  }

  // each new position attends to the row's positions up to itself, computed as a decode step at that position is
  for (int t = 0; t < job.steps; t++) {
    const int position = first + t;
    const int len = position + 1;
    // the op's window: the last local_window_size positions, the new one included (NativeAttentionTest: as the op)
    const int from = a.local_window_size > 0 && len > a.local_window_size ? len - static_cast<int>(a.local_window_size) : 0;
    for (int g = 0; g < group; g++) {
      const T* qs = job.query + row * job.q_row_stride + t * job.q_step_stride + static_cast<size_t>(kh * group + g) * dim;
      for (int d = 0; d < dim; d++) q[g * dim + d] = widen(qs[d]);
      if (rotary) {
        // rounded to the node's type as onnxruntime's kernel holds the rotated query
        rotate(q + g * dim, dim, job.rotary_dim, job.cos + static_cast<size_t>(position) * half_rotary,
               job.sin + static_cast<size_t>(position) * half_rotary, a.rotary_interleaved != 0);
        for (int d = 0; d < dim; d++) q[g * dim + d] = widen(static_cast<T>(q[g * dim + d]));
      }
    }
    ortserve::AttendArgs args{};
    args.q = q;
    args.group = group;
    args.dim = dim;
    args.keys = job.present_key + head_base;
    args.values = job.present_value + head_base;
    args.half = sizeof(T) == 2;
    args.from = from;
    args.len = len;
    args.scale = scale;
    args.softcap = a.softcap;
    args.scores = s;
    args.out = out;
    job.attend(args);
    for (int g = 0; g < group; g++) {
      T* o = job.output + (static_cast<size_t>(row) * job.steps + t) * a.num_heads * dim + static_cast<size_t>(kh * group + g) * dim;
      for (int d = 0; d < dim; d++) o[d] = static_cast<T>(out[g * dim + d]);
    }
  }
}

// the widest kernel this CPU runs for a head size, or at most the one a node's "kernel" attribute names ("avx512",
// "avx2", "portable": the tests run each; the rewrite never sets it)
static ortserve::AttendFn attend_for(int dim, const std::string& at_most) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool any = at_most.empty() || at_most == "avx512";
  if (any && avx512 && dim % 16 == 0 && dim <= 512) return &ortserve::attend_avx512;
  if ((any || at_most == "avx2") && avx2 && dim % 8 == 0 && dim <= 512) return &ortserve::attend_avx2;
#endif
  return &ortserve::attend_portable;
}

// steps of at most this many new positions per row are computed here (decode, and speculative verification: the
// engine drafts at most 8 tokens, so it verifies at most 9 positions)
constexpr int64_t kNativeSteps = 16;

struct Kernel {
  Attributes a;
  ONNXTensorElementDataType type;
  Ort::Op delegate{nullptr};
  int inputs = 0;
  std::string kernel;  // the "kernel" attribute: empty for the widest the CPU runs

  Kernel(const OrtKernelInfo* info, ONNXTensorElementDataType t) : type(t) {
    Ort::ConstKernelInfo ki(info);
    std::vector<Ort::OpAttr> attrs;
    // an attribute the node sets: read into its field and passed on to onnxruntime's kernel (absent: the default stays)
    auto attr = [&](const char* name, auto& field) {
      std::remove_reference_t<decltype(field)> v;
      constexpr bool is_int = std::is_same_v<decltype(v), int64_t>;
      OrtStatus* st;
      if constexpr (is_int) st = g_api->KernelInfoGetAttribute_int64(info, name, &v);
      else st = g_api->KernelInfoGetAttribute_float(info, name, &v);
      if (st) { g_api->ReleaseStatus(st); return; }
      field = v;
      attrs.emplace_back(name, &v, 1, is_int ? OrtOpAttrType::ORT_OP_ATTR_INT : OrtOpAttrType::ORT_OP_ATTR_FLOAT);
    };
    size_t size = 0;
    if (OrtStatus* st = g_api->KernelInfoGetAttribute_string(info, "kernel", nullptr, &size)) {
      g_api->ReleaseStatus(st);
    } else if (size > 1) {
      std::vector<char> name(size);
      Ort::ThrowOnError(g_api->KernelInfoGetAttribute_string(info, "kernel", name.data(), &size));
      kernel.assign(name.data());
    }
    attr("num_heads", a.num_heads);
    attr("kv_num_heads", a.kv_num_heads);
    attr("local_window_size", a.local_window_size);
    attr("do_rotary", a.do_rotary);
    attr("rotary_interleaved", a.rotary_interleaved);
    attr("scale", a.scale);
    attr("softcap", a.softcap);
    if (a.num_heads <= 0 || a.kv_num_heads <= 0 || a.num_heads % a.kv_num_heads != 0 || a.num_heads / a.kv_num_heads > 64)
      ORT_CXX_API_THROW("dev.ortserve.GroupQueryAttention: num_heads must be a positive multiple (at most 64) of kv_num_heads", ORT_INVALID_ARGUMENT);
    inputs = static_cast<int>(ki.GetInputCount());
    const char* names[] = {"T", "M"};
    ONNXTensorElementDataType values[] = {type, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
    delegate = Ort::Op::Create(info, "GroupQueryAttention", "com.microsoft", 1, names, values, 2, attrs.data(), attrs.size(),
                               static_cast<size_t>(inputs), 3);
  }

  template <typename T>
  void decode(Ort::KernelContext& ctx, OrtKernelContext* raw) {
    auto query = ctx.GetInput(0);
    auto key = ctx.GetInput(1);
    auto value = ctx.GetInput(2);
    auto past_key = ctx.GetInput(3);
    auto past_value = ctx.GetInput(4);
    auto seqlens = ctx.GetInput(5);
    auto qshape = query.GetTensorTypeAndShapeInfo().GetShape();
    auto pshape = past_key.GetTensorTypeAndShapeInfo().GetShape();
    const int64_t rows = qshape[0], steps = qshape[1];
    const int64_t heads = a.num_heads, kv_heads = a.kv_num_heads;
    const bool packed = key == nullptr || key.GetTensorTypeAndShapeInfo().GetElementCount() == 0;
    const int64_t dim = packed ? qshape[2] / (heads + 2 * kv_heads) : qshape[2] / heads;
    const int64_t past_capacity = pshape[2];
    const int64_t total_len = ctx.GetInput(6).GetTensorData<int32_t>()[0];
    // the op's present: max(total_sequence_length, the past buffer's length) positions; the same buffer as the past when
    // the engine binds them in place, else the past is copied in first
    const int64_t capacity = std::max(total_len, past_capacity);
    const int32_t* lens = seqlens.GetTensorData<int32_t>();
    for (int64_t r = 0; r < rows; r++) {
      if (lens[r] + 1 < steps || lens[r] >= capacity)
        ORT_CXX_API_THROW("dev.ortserve.GroupQueryAttention: a row's position is outside its KV buffer", ORT_INVALID_ARGUMENT);
    }
    std::vector<int64_t> out_shape{rows, steps, heads * dim};
    std::vector<int64_t> present_shape{rows, kv_heads, capacity, dim};
    auto output = ctx.GetOutput(0, out_shape);
    auto present_key = ctx.GetOutput(1, present_shape);
    auto present_value = ctx.GetOutput(2, present_shape);
    T* pk = present_key.GetTensorMutableData<T>();
    T* pv = present_value.GetTensorMutableData<T>();
    const T* old_k = past_key.GetTensorData<T>();
    const T* old_v = past_value.GetTensorData<T>();
    if (pk != old_k || pv != old_v) {
      const size_t head = static_cast<size_t>(past_capacity) * dim;
      for (int64_t h = 0; h < rows * kv_heads; h++) {
        if (pk != old_k) std::memcpy(pk + h * capacity * dim, old_k + h * head, sizeof(T) * head);
        if (pv != old_v) std::memcpy(pv + h * capacity * dim, old_v + h * head, sizeof(T) * head);
      }
    }

    DecodeJob<T> job{};
    job.a = &a;
    job.query = query.GetTensorData<T>();
    job.steps = static_cast<int>(steps);
    job.q_step_stride = qshape[2];
    job.q_row_stride = steps * qshape[2];
    if (packed) {
      job.key = job.query;
      job.value = job.query;
      job.kv_step_stride = qshape[2];
      job.kv_row_stride = steps * qshape[2];
      job.k_offset = heads * dim;
      job.v_offset = (heads + kv_heads) * dim;
    } else {
      job.key = key.GetTensorData<T>();
      job.value = value.GetTensorData<T>();
      job.kv_step_stride = kv_heads * dim;
      job.kv_row_stride = steps * kv_heads * dim;
      job.k_offset = 0;
      job.v_offset = 0;
    }
    job.present_key = pk;
    job.present_value = pv;
    job.capacity = static_cast<int>(capacity);
    job.seqlens = lens;
    job.dim = static_cast<int>(dim);
    job.output = output.GetTensorMutableData<T>();
    job.attend = attend_for(static_cast<int>(dim), kernel);
    if (a.do_rotary != 0) {
      if (inputs < 9) ORT_CXX_API_THROW("dev.ortserve.GroupQueryAttention: do_rotary without cos_cache / sin_cache", ORT_INVALID_ARGUMENT);
      auto cos = ctx.GetInput(7);
      auto sin = ctx.GetInput(8);
      auto cshape = cos.GetTensorTypeAndShapeInfo().GetShape();
      for (int64_t r = 0; r < rows; r++) {
        if (lens[r] >= cshape[0]) ORT_CXX_API_THROW("dev.ortserve.GroupQueryAttention: a position past the rotary cache", ORT_INVALID_ARGUMENT);
      }
      job.cos = cos.GetTensorData<T>();
      job.sin = sin.GetTensorData<T>();
      job.rotary_dim = static_cast<int>(cshape[1] * 2);
    }
    const size_t tasks = static_cast<size_t>(rows * kv_heads);
    Ort::ThrowOnError(g_api->KernelContext_ParallelFor(raw, &decode_one<T>, tasks, 0, &job));
  }

  OrtStatusPtr ComputeV2(OrtKernelContext* raw) {
    try {
      Compute(raw);
    } catch (const Ort::Exception& e) {
      return g_api->CreateStatus(e.GetOrtErrorCode(), e.what());
    } catch (const std::exception& e) {
      return g_api->CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
  }

  void Compute(OrtKernelContext* raw) {
    Ort::KernelContext ctx(raw);
    auto query = ctx.GetInput(0);
    auto qshape = query.GetTensorTypeAndShapeInfo().GetShape();
    // one new position per row (decode) or a few (a speculative verification: each position computed as a decode step
    // there would be, so drafting leaves the output as it was); more, a prompt's chunk: onnxruntime's own kernel
    // (one row then, its new positions ending at its seqlens_k as onnxruntime takes several new tokens after a past)
    bool native = qshape.size() == 3 && qshape[1] == 1;
    if (!native && qshape.size() == 3 && qshape[0] == 1 && qshape[1] <= kNativeSteps) {
      native = ctx.GetInput(5).GetTensorData<int32_t>()[0] + 1 >= qshape[1];
    }
    if (native) {
      if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) decode<float>(ctx, raw);
      else decode<half>(ctx, raw);
      return;
    }
    // a prompt's chunk: onnxruntime's own kernel, into this node's outputs
    std::vector<const OrtValue*> in(inputs, nullptr);
    for (int i = 0; i < inputs; i++) in[i] = ctx.GetInput(static_cast<size_t>(i));
    // the outputs' shapes as the op computes them: [rows, S, heads * dim], present [rows, kvHeads, max(total, capacity), dim]
    auto key = ctx.GetInput(1);
    auto past_key = ctx.GetInput(3);
    auto total = ctx.GetInput(6);
    const int64_t heads = a.num_heads, kv_heads = a.kv_num_heads;
    const bool packed = key == nullptr || key.GetTensorTypeAndShapeInfo().GetElementCount() == 0;
    const int64_t dim = packed ? qshape[2] / (heads + 2 * kv_heads) : qshape[2] / heads;
    auto pshape = past_key.GetTensorTypeAndShapeInfo().GetShape();
    const int64_t total_len = total.GetTensorData<int32_t>()[0];
    std::vector<int64_t> out_shape{qshape[0], qshape[1], heads * dim};
    std::vector<int64_t> present_shape{qshape[0], kv_heads, std::max<int64_t>(total_len, pshape[2]), dim};
    OrtValue* out[3] = {ctx.GetOutput(0, out_shape), ctx.GetOutput(1, present_shape), ctx.GetOutput(2, present_shape)};
    delegate.Invoke(raw, in.data(), in.size(), out, 3);
  }
};

struct Op : Ort::CustomOpBase<Op, Kernel, true> {
  ONNXTensorElementDataType type;
  explicit Op(ONNXTensorElementDataType t) : type(t) {}

  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const {
    try {
      *kernel = new Kernel(info, type);
    } catch (const Ort::Exception& e) {
      return g_api->CreateStatus(e.GetOrtErrorCode(), e.what());
    } catch (const std::exception& e) {
      return g_api->CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
  }
  const char* GetName() const { return "GroupQueryAttention"; }
  const char* GetExecutionProviderType() const { return "CPUExecutionProvider"; }
  size_t GetInputTypeCount() const { return 9; }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 5 || i == 6 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 : type;
  }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return i == 1 || i == 2 || i >= 7 ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                                     : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
  OrtMemType GetInputMemoryType(size_t i) const { return i == 6 ? OrtMemTypeCPUInput : OrtMemTypeDefault; }
  size_t GetOutputTypeCount() const { return 3; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return type; }
};

Op& float_op() { static Op op(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT); return op; }
Op& half_op() { static Op op(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16); return op; }

}  // namespace

void ortserve::attend_portable(const AttendArgs& a) {
  if (a.half) attend_portable_typed<half>(a);
  else attend_portable_typed<float>(a);
}

extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* base) {
  g_api = base->GetApi(ORT_API_VERSION);
  if (g_api == nullptr) return nullptr;
  Ort::InitApi(g_api);
  try {
    static Ort::CustomOpDomain domain("dev.ortserve");
    static bool added = false;
    if (!added) {
      domain.Add(&float_op());
      domain.Add(&half_op());
      domain.Add(ortserve::matmul_nbits_op());
      added = true;
    }
    Ort::UnownedSessionOptions(options).Add(domain);
  } catch (const std::exception& e) {
    return g_api->CreateStatus(ORT_FAIL, e.what());
  }
  return nullptr;
}
