// Attention over TurboQuant KV layers (k8v3 with its own instantiation, every other kXvY through
// run-time widths): launch_for_format's instantiations (device/attention_core.cuh).
#include "backends/cuda/device/attention_core.cuh"

namespace ringlm::cuda::attention_detail {

template void launch_for_format(const device::AttnArgs&, const device::TurboKvReader<8, 3>&,
                                const RowsSummary&, int64_t, cudaStream_t);
template void launch_for_format(const device::AttnArgs&, const device::TurboKvReader<0, 0>&,
                                const RowsSummary&, int64_t, cudaStream_t);

}  // namespace ringlm::cuda::attention_detail
