// Programmatic dependent launch (sm_90): a kernel started by launch_pdl() may begin while the
// kernel before it in the stream is still running — its blocks get scheduled and issue work that
// needs nothing from earlier kernels (a GEMV's first weight loads), instead of the GPU idling
// between two kernels of a decode step. Rules for such a kernel, in every block and every path:
//  - wait_prior_grid() before touching memory an earlier kernel writes or reads (it returns once
//    every earlier kernel has finished and its writes are visible; a no-op when launched plainly);
//  - launch_dependents() lets the next kernel start early (it waits for us in turn). Call it
//    after wait_prior_grid() (a persistent GEMV: after its tiles): on the H200 every earlier
//    trigger tried left the next persistent GEMV with a tail of ~18 µs per layer (its SMs
//    streaming at unequal rates; docs/benchmarks.md, twelfth session).
// Kernels launched with <<<>>> keep plain stream order. RINGLM_CUDA_PDL=0 in the environment
// launches plainly (A/B and debugging); results are bit for bit the same either way.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backends/cuda/runtime.h"

namespace ringlm::cuda {

namespace device {

__device__ __forceinline__ void wait_prior_grid() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace device

// kernel<<<grid, block, smem, stream>>>(args...), allowed to overlap the previous kernel.
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  config.attrs = &attribute;
  config.numAttrs = 1;
  // A failed launch is left for the caller's check_launch (cudaGetLastError) to report.
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace ringlm::cuda
