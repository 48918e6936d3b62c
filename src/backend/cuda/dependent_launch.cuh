// Programmatic dependent launch (Hopper's PDL): a kernel launched with launch_dependent() may start while the
// kernel ahead of it on the stream is still finishing, so a decode step's ~300 short kernels overlap their
// launch, block scheduling and prologue with the tail of the one before instead of leaving the GPU idle
// between them (and a weight-streaming GEMM can start pulling its weights, which nothing upstream writes).
//
// The contract, for every kernel launched this way: call wait_for_upstream() before reading anything an
// earlier kernel on the stream wrote and before writing anything an earlier kernel reads (it returns once
// every upstream grid has completed and its writes are visible); call release_downstream() once the next
// kernel may be scheduled (it then still waits for this grid's completion before touching its data). A kernel
// that calls release_downstream() only after its own wait_for_upstream() keeps, by induction, every kernel
// two or more launches back complete by the time it starts. Before sm_90 both calls return at once and the
// stream's usual full ordering applies. Graph capture records the
// attribute as a programmatic edge, so recorded decode steps keep the overlap.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace fovea::cuda {

__device__ __forceinline__ void wait_for_upstream() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void release_downstream() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launch attribute that lets `config`'s kernel start before its stream predecessor finishes.
inline void allow_early_start(cudaLaunchConfig_t& config, cudaLaunchAttribute* attrs) {
  cudaLaunchAttribute& a = attrs[config.numAttrs++];
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attrs;
}

// kernel<<<grid, block, smem, stream>>>(args...) as a dependent launch. The kernel must follow the contract
// above.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attrs[1];
  allow_early_start(config, attrs);
  FOVEA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

}  // namespace fovea::cuda
