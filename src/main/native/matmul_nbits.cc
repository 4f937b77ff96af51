// dev.ortserve.MatMulNBits: com.microsoft.MatMulNBits (float32 A, 4- or 8-bit B in blocks of 32, float32 scales, the
// default zero point; attributes K, N, bits, block_size, accuracy_level) computed here (qmatmul.h): A quantized per
// block of 32 to int8, integer dot products, each weight block read once for up to four rows, output columns split over
// onnxruntime's intra-op threads. Steps of every length: onnxruntime's own kernel cannot be handed a long step (a prompt's
// chunk) through CreateOp / InvokeOp as served, since a kernel made that way is never prepacked and dequantizes the
// whole matrix to float32 on every call (4x slower at 64 rows, docs/benchmarks.md).
#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "matmul_nbits.h"
#include "qmatmul.h"

namespace {

// output columns per parallel task
constexpr int64_t kColumnsPerTask = 16;

struct Kernels {
  ortserve::QMatFn mul;
  ortserve::QuantizeFn quantize;
  bool octets;  // the kernel takes rows in the octet layout (qmatmul.h)
};

// the widest kernel the CPU runs, at most `at_most` (the test-only attribute: "vnni", "avx2", "portable"; empty: any),
// with its quantizer: the vector kernels quantize with AVX2, the portable one in plain C++ (the same bytes either way)
Kernels kernels_for(const std::string& at_most) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool vnni = avx2 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  if ((at_most.empty() || at_most == "vnni") && vnni) return {&ortserve::qmat_vnni, &ortserve::quantize_avx2, true};
  if ((at_most.empty() || at_most == "vnni" || at_most == "avx2") && avx2) return {&ortserve::qmat_avx2, &ortserve::quantize_avx2, false};
#endif
  return {&ortserve::qmat_portable, &ortserve::quantize_portable, false};
}

struct Job {
  ortserve::QMatArgs args;
  ortserve::QMatFn fn;
};

void run_task(void* data, size_t task) {
  const Job& job = *static_cast<const Job*>(data);
  ortserve::QMatArgs a = job.args;
  a.n_from = static_cast<int64_t>(task) * kColumnsPerTask;
  a.n_to = std::min(a.n_total, a.n_from + kColumnsPerTask);
  job.fn(a);
}

struct Kernel {
  int64_t k = 0, n = 0, bits = 0, block_size = 0;
  std::string kernel;  // the test-only "kernel" attribute: empty for the widest the CPU runs, "vnni", "avx2", "portable"

  explicit Kernel(const OrtKernelInfo* info) {
    const OrtApi& api = Ort::GetApi();
    Ort::ConstKernelInfo ki(info);
    k = ki.GetAttribute<int64_t>("K");
    n = ki.GetAttribute<int64_t>("N");
    bits = ki.GetAttribute<int64_t>("bits");
    block_size = ki.GetAttribute<int64_t>("block_size");
    size_t size = 0;
    if (OrtStatus* st = api.KernelInfoGetAttribute_string(info, "kernel", nullptr, &size)) {
      api.ReleaseStatus(st);
    } else if (size > 1) {
      std::vector<char> name(size);
      Ort::ThrowOnError(api.KernelInfoGetAttribute_string(info, "kernel", name.data(), &size));
      kernel.assign(name.data());
    }
    if ((bits != 4 && bits != 8) || block_size != ortserve::kQBlock || k <= 0 || n <= 0)
      ORT_CXX_API_THROW("dev.ortserve.MatMulNBits: 4 or 8 bits in blocks of 32 only", ORT_INVALID_ARGUMENT);
  }

  OrtStatusPtr ComputeV2(OrtKernelContext* raw) {
    try {
      Compute(raw);
    } catch (const Ort::Exception& e) {
      return Ort::GetApi().CreateStatus(e.GetOrtErrorCode(), e.what());
    } catch (const std::exception& e) {
      return Ort::GetApi().CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
  }

  void Compute(OrtKernelContext* raw) {
    Ort::KernelContext ctx(raw);
    auto a = ctx.GetInput(0);
    auto shape = a.GetTensorTypeAndShapeInfo().GetShape();
    if (shape.empty() || shape.back() != k) ORT_CXX_API_THROW("dev.ortserve.MatMulNBits: A's last dimension is not K", ORT_INVALID_ARGUMENT);
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); i++) rows *= shape[i];
    std::vector<int64_t> out_shape(shape);
    out_shape.back() = n;
    auto y = ctx.GetOutput(0, out_shape);
    if (rows == 0) return;
    const int blocks = static_cast<int>((k + ortserve::kQBlock - 1) / ortserve::kQBlock);
    // the weights and scales hold what K, N and bits say: the kernels read exactly that much
    const int64_t blob = ortserve::kQBlock * bits / 8;
    if (ctx.GetInput(1).GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(n * blocks * blob) ||
        ctx.GetInput(2).GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(n * blocks))
      ORT_CXX_API_THROW("dev.ortserve.MatMulNBits: B or scales do not match K, N and bits", ORT_INVALID_ARGUMENT);
    thread_local std::vector<int8_t> q;
    thread_local std::vector<float> scales;
    thread_local std::vector<float> spread;
    thread_local std::vector<int32_t> zero;
    q.resize(static_cast<size_t>(rows) * blocks * ortserve::kQBlock);
    scales.resize(static_cast<size_t>(rows) * blocks * 2);
    const size_t spread_row = static_cast<size_t>(bits == 4 ? blocks / 2 : blocks) * 8;
    spread.resize(static_cast<size_t>(rows) * spread_row);
    zero.resize(static_cast<size_t>(rows) * blocks);
    const float* x = a.GetTensorData<float>();
    const Kernels use = kernels_for(kernel);
    for (int64_t r = 0; r < rows; r++) {
      use.quantize({x + r * k, k, blocks, static_cast<int>(bits), q.data() + static_cast<size_t>(r) * blocks * ortserve::kQBlock,
                    scales.data() + static_cast<size_t>(r) * blocks, scales.data() + static_cast<size_t>(rows + r) * blocks,
                    spread.data() + static_cast<size_t>(r) * spread_row, zero.data() + static_cast<size_t>(r) * blocks, use.octets});
    }
    Job job{};
    job.fn = use.mul;
    job.args.w = ctx.GetInput(1).GetTensorData<uint8_t>();
    job.args.scales = ctx.GetInput(2).GetTensorData<float>();
    job.args.bits = static_cast<int>(bits);
    job.args.blocks = blocks;
    job.args.rows = static_cast<int>(rows);
    job.args.x = {q.data(), scales.data(), scales.data() + static_cast<size_t>(rows) * blocks, spread.data(), zero.data()};
    job.args.y = y.GetTensorMutableData<float>();
    job.args.n_total = n;
    const size_t tasks = static_cast<size_t>((n + kColumnsPerTask - 1) / kColumnsPerTask);
    Ort::ThrowOnError(Ort::GetApi().KernelContext_ParallelFor(raw, &run_task, tasks, 0, &job));
  }
};

struct Op : Ort::CustomOpBase<Op, Kernel, true> {
  OrtStatusPtr CreateKernelV2(const OrtApi& api, const OrtKernelInfo* info, void** kernel) const {
    try {
      *kernel = new Kernel(info);
    } catch (const Ort::Exception& e) {
      return api.CreateStatus(e.GetOrtErrorCode(), e.what());
    } catch (const std::exception& e) {
      return api.CreateStatus(ORT_FAIL, e.what());
    }
    return nullptr;
  }
  const char* GetName() const { return "MatMulNBits"; }
  const char* GetExecutionProviderType() const { return "CPUExecutionProvider"; }
  size_t GetInputTypeCount() const { return 3; }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 1 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
};

}  // namespace

void ortserve::quantize_portable(const QuantizeArgs& a) {
  for (int b = 0; b < a.blocks; b++) {
    float v[kQBlock];
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; j++) {
      int64_t at = static_cast<int64_t>(b) * kQBlock + j;
      v[j] = at < a.k ? a.x[at] : 0.0f;
      amax = std::max(amax, std::fabs(v[j]));
    }
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQBlock; j++) {
      int qi = static_cast<int>(std::nearbyint(v[j] * id));
      qi = std::min(127, std::max(-127, qi));
      sum += qi;
      a.q[a.bits == 4 ? nibble_order(b, j, a.blocks) : b * kQBlock + j] = static_cast<int8_t>(qi);
    }
    a.scale[b] = d;
    a.corr[b] = a.bits == 4 ? 8.0f * d * static_cast<float>(sum) : 0.0f;
  }
  // the scales spread as the vector kernels multiply them (qmatmul.h)
  if (a.bits == 4) {
    for (int p = 0; p < a.blocks / 2; p++)
      for (int i = 0; i < 8; i++) a.spread[p * 8 + i] = a.scale[2 * p + i / 4];
  } else {
    for (int b = 0; b < a.blocks; b++)
      for (int i = 0; i < 8; i++) a.spread[b * 8 + i] = a.scale[b];
  }
}

void ortserve::qmat_portable(const QMatArgs& a) {
  const int blob = kQBlock * a.bits / 8;
  for (int64_t n = a.n_from; n < a.n_to; n++) {
    const uint8_t* w = a.w + static_cast<size_t>(n) * a.blocks * blob;
    const float* ws = a.scales + static_cast<size_t>(n) * a.blocks;
    for (int r = 0; r < a.rows; r++) {
      const int8_t* xq = a.x.q + static_cast<size_t>(r) * a.blocks * kQBlock;
      const float* xs = a.x.scale + static_cast<size_t>(r) * a.blocks;
      const float* xc = a.x.corr + static_cast<size_t>(r) * a.blocks;
      float sum = 0.0f, zero = 0.0f;
      for (int b = 0; b < a.blocks; b++) {
        int32_t dot = 0;
        const uint8_t* wb = w + static_cast<size_t>(b) * blob;
        const int8_t* xb = xq + static_cast<size_t>(b) * kQBlock;
        if (a.bits == 4) {
          for (int j = 0; j < 16; j++) {
            dot += (wb[j] & 0x0f) * xq[nibble_order(b, 2 * j, a.blocks)] + (wb[j] >> 4) * xq[nibble_order(b, 2 * j + 1, a.blocks)];
          }
        } else {
          for (int j = 0; j < kQBlock; j++) dot += (static_cast<int32_t>(wb[j]) - 128) * xb[j];
        }
        sum += static_cast<float>(dot) * (ws[b] * xs[b]);
        zero += ws[b] * xc[b];
      }
      a.y[static_cast<size_t>(r) * a.n_total + n] = sum - zero;
    }
  }
}

OrtCustomOp* ortserve::matmul_nbits_op() {
  static Op op;
  return &op;
}
