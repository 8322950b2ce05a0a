// Attention over MLX-affine KV layers (4/8 bits, groups of 32/64): launch_for_format's
// instantiations (device/attention_core.cuh).
#include "backends/cuda/device/attention_core.cuh"

namespace ringlm::cuda::attention_detail {

template void launch_for_format(const device::AttnArgs&, const device::AffineKvReader<4, 32>&,
                                const RowsSummary&, int64_t, cudaStream_t);
template void launch_for_format(const device::AttnArgs&, const device::AffineKvReader<4, 64>&,
                                const RowsSummary&, int64_t, cudaStream_t);
template void launch_for_format(const device::AttnArgs&, const device::AffineKvReader<8, 32>&,
                                const RowsSummary&, int64_t, cudaStream_t);
template void launch_for_format(const device::AttnArgs&, const device::AffineKvReader<8, 64>&,
                                const RowsSummary&, int64_t, cudaStream_t);

}  // namespace ringlm::cuda::attention_detail
