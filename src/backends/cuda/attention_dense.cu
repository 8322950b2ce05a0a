// Attention over dense (f32, bf16, f16) KV layers: launch_for_format's instantiations
// (device/attention_core.cuh).
#include "backends/cuda/device/attention_core.cuh"

namespace ringlm::cuda::attention_detail {

template void launch_for_format(const device::AttnArgs&, const device::DenseKvReader<float>&,
                                const RowsSummary&, int64_t, cudaStream_t);
template void launch_for_format(const device::AttnArgs&,
                                const device::DenseKvReader<__nv_bfloat16>&, const RowsSummary&,
                                int64_t, cudaStream_t);
template void launch_for_format(const device::AttnArgs&, const device::DenseKvReader<__half>&,
                                const RowsSummary&, int64_t, cudaStream_t);

}  // namespace ringlm::cuda::attention_detail
