// The per-KV-format attention launch, declared for attention.cu and defined in
// device/attention_core.cuh; instantiated for each reader of device/kv_readers.cuh in
// attention_dense.cu, attention_affine.cu and attention_turbo.cu (one translation unit per
// format family: they compile in parallel).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device_rows.h"

namespace ringlm::cuda::attention_detail {

// Runs the attention kernels of one step over a KV layer read through `kv` (a device/kv_*.cuh
// reader): prefill rows, then decode rows with their split-K merge.
template <typename Kv>
void launch_for_format(const device::AttnArgs& args, const Kv& kv, const RowsSummary& summary,
                       int64_t T, cudaStream_t stream);

// Whether the tensor-core decode kernels of this step (16-bit K/V) write their outputs
// themselves (AttnArgs::direct_out): decode_direct() is on and every decode row has one part.
// Counts the steps that do (decode_direct_count).
bool take_direct_decode(const device::AttnArgs& args);

}  // namespace ringlm::cuda::attention_detail
