// CudaBackend construction, memory and transfers, and the factory functions the rest of Fovea links against.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/host_stager.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quantize_fp8.h"

namespace fovea {
namespace cuda {

// A failed CUDA call means the device (or its context) is unusable: a DeviceError, which takes the engine out.
void throw_cuda_error(const char* file, int line, const char* call, cudaError_t code) {
  const char* base = std::strrchr(file, '/');
  throw DeviceError(str(base ? base + 1 : file, ":", line, ": ", call, " failed: ", cudaGetErrorName(code), " (",
                        int(code), "): ", cudaGetErrorString(code)));
}

void throw_cublas_error(const char* file, int line, const char* call, cublasStatus_t code) {
  throw_error(file, line, str(call, " failed: cuBLAS status ", int(code)));
}

namespace {

void check_on_device(const Tensor& t, const char* what) {
  FOVEA_CHECK(t.device == Device::CUDA && !t.empty(), what, " must be a CUDA tensor");
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// An environment switch: unset or empty gives `fallback`, "0" is off, anything else on.
bool env_flag(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  return std::strcmp(value, "0") != 0;
}

}  // namespace

CudaBackend::CudaBackend(int device_index)
    : device_index_(device_index), bytes_in_use_(std::make_shared<std::atomic<size_t>>(0)) {
  FOVEA_CUDA_CHECK(cudaSetDevice(device_index));
  FOVEA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  FOVEA_CUDA_CHECK(cudaMalloc(&error_flag_, sizeof(int)));
  FOVEA_CUDA_CHECK(cudaMemsetAsync(error_flag_, 0, sizeof(int), stream_));
  // 64 MiB of split-KV partials: 64 sequences x 8 KV heads x 4 rows x 32 splits at head_dim 128 need 34 MiB;
  // larger steps just split less.
  attention_workspace_bytes_ = size_t(64) << 20;
  FOVEA_CUDA_CHECK(cudaMalloc(&attention_workspace_, attention_workspace_bytes_));
  const bool profile = env_flag("FOVEA_PROFILE_OPS", false);
  GemmTuning tuning;
  tuning.log = profile;  // the profile says which algorithm each small-M shape was given
  gemm_ = std::make_unique<LtGemm>(stream_, tuning);
  if (profile) profiler_ = std::make_unique<OpProfiler>(stream_);
  stager_ = std::make_unique<HostStager>(stream_);
  prepare_attention_kernels();
  prepare_fp8_kernels();
  FOVEA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

CudaBackend::~CudaBackend() {
  if (profiler_) {
    try {
      std::fputs(profiler_->report().c_str(), stderr);
    } catch (...) {  // a destructor must not throw; the report is only diagnostics
    }
    profiler_.reset();
  }
  for (cudaGraphExec_t graph : graphs_)
    if (graph) cudaGraphExecDestroy(graph);
  fp8_gemm_.reset();  // before gemm_: it borrows gemm_'s cuBLASLt handle
  gemm_.reset();
  if (stream_) cudaStreamSynchronize(stream_);
  if (fp8_activation_) cudaFree(fp8_activation_);
  for (void* old : fp8_retired_) cudaFree(old);
  if (fp8_stats_) cudaFree(fp8_stats_);
  if (fp8_ones_) cudaFree(fp8_ones_);
  stager_.reset();  // after the sync: queued copies may still read its pinned memory
  if (error_flag_) cudaFree(error_flag_);
  if (attention_workspace_) cudaFree(attention_workspace_);
  if (stream_) cudaStreamDestroy(stream_);
}

Tensor CudaBackend::alloc(DType dtype, const Shape& shape) {
  Tensor t;
  t.dtype = dtype;
  t.device = Device::CUDA;
  t.shape = shape;
  for (int64_t d : shape) FOVEA_CHECK(d >= 0, "alloc: negative dimension in ", shape_str(shape));
  const size_t bytes = std::max<size_t>(t.nbytes(), 16);
  void* p = nullptr;
  FOVEA_CUDA_CHECK(cudaSetDevice(device_index_));
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free allocation error before reporting it
    FOVEA_FAIL("cudaMalloc of ", bytes, " bytes for ", shape_str(shape), " failed: ", cudaGetErrorString(status),
               " (", *bytes_in_use_, " bytes already in use)");
  }
  *bytes_in_use_ += bytes;
  auto counter = bytes_in_use_;
  t.owner = std::shared_ptr<void>(p, [counter, bytes](void* ptr) {
    cudaFree(ptr);  // a deleter must not throw
    *counter -= bytes;
  });
  t.data = p;
  return t;
}

size_t CudaBackend::memory_free() const {
  size_t free_bytes = 0, total_bytes = 0;
  FOVEA_CUDA_CHECK(cudaSetDevice(device_index_));
  FOVEA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void CudaBackend::upload(Tensor& dst, const Tensor& host_src) {
  check_on_device(dst, "upload destination");
  FOVEA_CHECK(host_src.device == Device::CPU, "upload source must be a host tensor");
  FOVEA_CHECK(host_src.numel() == dst.numel(), "upload: ", shape_str(host_src.shape), " into ",
              shape_str(dst.shape));
  if (dst.numel() == 0) return;
  FOVEA_CHECK(host_src.dtype == dst.dtype || (is_float(host_src.dtype) && is_float(dst.dtype)),
              "upload: cannot convert ", dtype_name(host_src.dtype), " to ", dtype_name(dst.dtype));
  FOVEA_CHECK(host_src.data != nullptr, "upload: the host source has no data");
  // A copy out of pinned memory would be recorded silently and replay whatever the staging holds later.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  FOVEA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  FOVEA_CHECK(capture == cudaStreamCaptureStatusNone, "upload: not allowed while recording a graph");
  // Returns once the source sits in pinned memory (the caller may reuse it); the copies run in stream order.
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return "upload " + shape_str(dst.shape); });
  stager_->upload(dst.data, dst.dtype, host_src);
}

Tensor CudaBackend::download(const Tensor& src) {
  check_on_device(src, "download source");
  Tensor raw = Tensor::host(src.dtype, src.shape);
  if (src.numel() > 0) {
    {
      OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return "download " + shape_str(src.shape); });
      FOVEA_CUDA_CHECK(cudaMemcpyAsync(raw.data, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    }
    FOVEA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  if (src.dtype == DType::F32 || src.dtype == DType::I32) return raw;
  return raw.to_f32();
}

void CudaBackend::copy(Tensor& dst, const Tensor& src) {
  check_on_device(dst, "copy destination");
  check_on_device(src, "copy source");
  FOVEA_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy: ", dtype_name(src.dtype),
              shape_str(src.shape), " into ", dtype_name(dst.dtype), shape_str(dst.shape));
  if (src.numel() == 0) return;
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return "copy " + shape_str(src.shape); });
  FOVEA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(Tensor& t) {
  check_on_device(t, "fill_zero");
  if (t.numel() == 0) return;
  OpScope scope(profiler_.get(), OpCategory::Copy, [&] { return "fill_zero " + shape_str(t.shape); });
  FOVEA_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
}

void CudaBackend::fill_random(Tensor& t, const RandomFill& fill) {
  check_on_device(t, "fill_random");
  int kind = 0;
  switch (t.dtype) {
    case DType::F32: kind = kRandomF32; break;
    case DType::BF16: kind = kRandomBF16; break;
    case DType::F16: kind = kRandomF16; break;
    case DType::F8E4M3: kind = kRandomE4M3; break;
    case DType::I32: kind = kRandomI32; break;
    case DType::U8: kind = kRandomU8; break;
    default: FOVEA_FAIL("fill_random: ", dtype_name(t.dtype), " is not supported");
  }
  OpScope scope(profiler_.get(), OpCategory::Other, [&] { return "fill_random " + shape_str(t.shape); });
  launch_fill_random(t.data, t.numel(), kind, fill, stream_);
}

void CudaBackend::synchronize() {
  FOVEA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  int flag = 0;
  FOVEA_CUDA_CHECK(cudaMemcpy(&flag, error_flag_, sizeof(int), cudaMemcpyDeviceToHost));
  if (flag) {
    FOVEA_CUDA_CHECK(cudaMemset(error_flag_, 0, sizeof(int)));
    FOVEA_FAIL("a CUDA op met an out-of-range index (embedding id, row index, KV slot or token id); it was "
               "clamped or skipped");
  }
}

// Thread-local capture: only this thread's calls are recorded, and a forbidden call from it (a synchronous copy,
// say) fails the capture with an error instead of silently running.
void CudaBackend::graph_begin() {
  FOVEA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

int CudaBackend::graph_end() {
  cudaGraph_t graph = nullptr;
  FOVEA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  FOVEA_CUDA_CHECK(status);
  graphs_.push_back(exec);
  return int(graphs_.size()) - 1;
}

void CudaBackend::graph_launch(int handle) {
  FOVEA_CHECK(handle >= 0 && size_t(handle) < graphs_.size() && graphs_[size_t(handle)],
              "graph_launch: no graph ", handle);
  // One row per recording: a replayed decode step is timed whole (its ops are not bracketed inside the graph).
  OpScope scope(profiler_.get(), OpCategory::Other, [&] { return str("graph_launch #", handle); });
  FOVEA_CUDA_CHECK(cudaGraphLaunch(graphs_[size_t(handle)], stream_));
}

uint8_t* CudaBackend::fp8_activation_buffer(size_t bytes) {
  if (!fp8_stats_) FOVEA_CUDA_CHECK(cudaMalloc(&fp8_stats_, kFp8StatsFloats * sizeof(float)));
  if (bytes <= fp8_activation_bytes_) return fp8_activation_;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  FOVEA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  FOVEA_CHECK(capture == cudaStreamCaptureStatusNone, "linear_fp8: ", bytes,
              " activation bytes exceed the quantization buffer while a graph is recorded (run the shape once "
              "before recording it)");
  if (fp8_activation_) fp8_retired_.push_back(fp8_activation_);  // a recorded graph may still read it
  fp8_activation_ = nullptr;
  FOVEA_CUDA_CHECK(cudaMalloc(&fp8_activation_, bytes));
  fp8_activation_bytes_ = bytes;
  return fp8_activation_;
}

void CudaBackend::set_batch_invariant(bool on) {
  batch_invariant_ = on;
  gemm_->set_batch_invariant(on);
  if (fp8_gemm_) fp8_gemm_->set_batch_invariant(on);
}

const float* CudaBackend::fp8_unit_scales(size_t count) {
  if (count <= fp8_ones_count_) return fp8_ones_;
  FOVEA_CHECK(!stream_is_capturing(stream_), "linear_fp8: ", count,
              " unit scales exceed the buffer while a graph is recorded (run the shape once before recording it)");
  if (fp8_ones_) fp8_retired_.push_back(fp8_ones_);
  fp8_ones_ = nullptr;
  const size_t grown = std::max(count, size_t(1) << 16);
  FOVEA_CUDA_CHECK(cudaMalloc(&fp8_ones_, grown * sizeof(float)));
  const std::vector<float> ones(grown, 1.f);
  FOVEA_CUDA_CHECK(cudaMemcpyAsync(fp8_ones_, ones.data(), grown * sizeof(float), cudaMemcpyHostToDevice, stream_));
  FOVEA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `ones` dies here
  fp8_ones_count_ = grown;
  return fp8_ones_;
}

std::string CudaBackend::profile_report() { return profiler_ ? profiler_->report() : std::string(); }

void CudaBackend::graph_release(int handle) {
  if (handle < 0 || size_t(handle) >= graphs_.size() || !graphs_[size_t(handle)]) return;
  FOVEA_CUDA_CHECK(cudaGraphExecDestroy(graphs_[size_t(handle)]));
  graphs_[size_t(handle)] = nullptr;
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  FOVEA_CHECK(cuda_backend_available(), "no CUDA GPU is visible to this process");
  return std::make_unique<cuda::CudaBackend>(device_index);
}

bool cuda_backend_available() { return cuda_device_count() > 0; }

int cuda_device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void bind_cuda_device(int device_index) { FOVEA_CUDA_CHECK(cudaSetDevice(device_index)); }

}  // namespace fovea
