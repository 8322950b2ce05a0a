#include "backends/cuda/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "backends/cuda/cuda_ops.h"

namespace ringlm::cuda {

Context& Context::get() {
  thread_local std::unique_ptr<Context> context(new Context());
  return *context;
}

Context::Context() {
  RINGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RINGLM_CUBLAS_CHECK(cublasCreate(&cublas_));
  RINGLM_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Pure f32 arithmetic for f32 GEMMs: no TF32 (the f32 tolerance of the op contract).
  RINGLM_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  // A workspace of our own: cuBLAS must not allocate while a step is captured into a graph.
  constexpr size_t kCublasWorkspace = size_t{32} << 20;
  RINGLM_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspace));
  RINGLM_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace));
  RINGLM_CUDA_CHECK(cudaMalloc(&errors_, sizeof(DeviceErrorRecord)));
  RINGLM_CUDA_CHECK(cudaMemset(errors_, 0, sizeof(DeviceErrorRecord)));
}

namespace {
// Per staging half: a step's uploads (token tables, block tables, sample jobs) of up to 256 rows
// at 128k context fit.
constexpr size_t kStagingHalf = size_t{16} << 20;
}  // namespace

Context::~Context() {
  // At thread exit; errors are ignored (the runtime may already be shutting down).
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  for (cudaEvent_t e : staging_.done) {
    if (e != nullptr) (void)cudaEventDestroy(e);
  }
  if (staging_.pinned != nullptr) (void)cudaFreeHost(staging_.pinned);
  for (Buffer& b : scratch_) (void)cudaFree(b.ptr);
  (void)cudaFree(errors_);
  (void)cudaFree(cublas_workspace_);
  if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void* Context::scratch(Scratch slot, size_t bytes, bool zeroed) {
  Buffer& b = scratch_[static_cast<size_t>(slot)];
  if (bytes <= b.bytes) return b.ptr;
  RINGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued work may still read b
  RINGLM_CUDA_CHECK(cudaFree(b.ptr));
  const size_t grown = std::max<size_t>({bytes, 2 * b.bytes, 1 << 16});
  b.ptr = nullptr;
  b.bytes = 0;
  ++scratch_generation_;
  RINGLM_CUDA_CHECK(cudaMalloc(&b.ptr, grown));
  if (zeroed) RINGLM_CUDA_CHECK(cudaMemset(b.ptr, 0, grown));
  b.bytes = grown;
  return b.ptr;
}

void Context::next_staging_half() {
  if (staging_.pinned == nullptr) return;
  RINGLM_CUDA_CHECK(cudaEventRecord(staging_.done[staging_.half], stream_));
  staging_.recorded[staging_.half] = true;
  staging_.half ^= 1;
  staging_.used = 0;
  if (staging_.recorded[staging_.half])
    RINGLM_CUDA_CHECK(cudaEventSynchronize(staging_.done[staging_.half]));
}

void Context::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RINGLM_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  const size_t aligned = (bytes + 255) / 256 * 256;
  if (capture != cudaStreamCaptureStatusNone || aligned > kStagingHalf) {
    RINGLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  if (staging_.pinned == nullptr) {
    RINGLM_CUDA_CHECK(cudaMallocHost(&staging_.pinned, 2 * kStagingHalf));
    for (cudaEvent_t& e : staging_.done)
      RINGLM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  if (staging_.used + aligned > kStagingHalf) next_staging_half();
  unsigned char* at =
      staging_.pinned + static_cast<size_t>(staging_.half) * kStagingHalf + staging_.used;
  std::memcpy(at, src, bytes);
  staging_.used += aligned;
  RINGLM_CUDA_CHECK(cudaMemcpyAsync(dst, at, bytes, cudaMemcpyHostToDevice, stream_));
}

void Context::synchronize() {
  RINGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  DeviceErrorRecord rec{};
  RINGLM_CUDA_CHECK(cudaMemcpy(&rec, errors_, sizeof(rec), cudaMemcpyDeviceToHost));
  if (rec.code == 0) return;
  RINGLM_CUDA_CHECK(cudaMemset(errors_, 0, sizeof(DeviceErrorRecord)));
  switch (static_cast<DeviceErrorCode>(rec.code)) {
    case DeviceErrorCode::EmbeddingId:
      RINGLM_FAIL("embedding: token id ", rec.value, " at index ", rec.index,
                  " is outside the vocabulary [0, ", rec.bound, ")");
    case DeviceErrorCode::RopePosition:
      RINGLM_FAIL("rope: position ", rec.value, " at index ", rec.index, " is negative");
    case DeviceErrorCode::KvSlot:
      RINGLM_FAIL("kv_write: slot ", rec.value, " of token ", rec.index,
                  " is outside the cache [0, ", rec.bound, ")");
    default:
      RINGLM_FAIL("CUDA backend: unknown device error code ", rec.code);
  }
}

void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  RINGLM_CHECK(status == cudaSuccess, "CUDA launch of ", kernel,
               " failed: ", cudaGetErrorName(status), ": ", cudaGetErrorString(status));
}

int sm_count() {
  static const int sms = [] {
    int device = 0, count = 0;
    RINGLM_CUDA_CHECK(cudaGetDevice(&device));
    RINGLM_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return std::max(count, 1);
  }();
  return sms;
}

double dram_peak_gbps() {
  static const double gbps = [] {
    int device = 0, clock_khz = 0, bus_bits = 0;
    RINGLM_CUDA_CHECK(cudaGetDevice(&device));
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky error of an unsupported attribute
      return 0.0;
    }
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
  }();
  return gbps;
}

bool env_switch_on(const char* name, bool by_default) {
  const char* v = std::getenv(name);
  if (v == nullptr) return by_default;
  const std::string_view value(v);
  return value == "0" ? false : (value == "1" ? true : by_default);
}

int64_t env_positive_int(const char* name, int64_t by_default) {
  const char* v = std::getenv(name);
  const int64_t parsed = v == nullptr ? 0 : std::atoll(v);
  return parsed > 0 ? parsed : by_default;
}

namespace {
constexpr char kPdlEnv[] = "RINGLM_CUDA_PDL";
constexpr char kRoundedInputsEnv[] = "RINGLM_CUDA_ROUNDED_INPUTS";
}  // namespace

bool pdl_enabled() {
  return switch_flag<kPdlEnv>().load(std::memory_order_relaxed);
}
void set_pdl_enabled(bool enabled) {
  switch_flag<kPdlEnv>().store(enabled, std::memory_order_relaxed);
}
bool rounded_matmul_inputs() {
  return switch_flag<kRoundedInputsEnv>().load(std::memory_order_relaxed);
}
void set_rounded_matmul_inputs(bool enabled) {
  switch_flag<kRoundedInputsEnv>().store(enabled, std::memory_order_relaxed);
}

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" status
    return false;
  }
  return count > 0;
}

void synchronize() {
  Context::get().synchronize();
}

}  // namespace ringlm::cuda
