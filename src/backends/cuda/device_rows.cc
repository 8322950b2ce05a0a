#include "backends/cuda/device_rows.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cuda/runtime.h"

namespace ringlm::cuda {

namespace {
// Layout of the packed tables, in int32 elements: query_start [R + 1], context_len [R],
// block_table [R · max_blocks].
struct Packed {
  size_t query_start, context_len, block_table, total;
  explicit Packed(const ops::AttentionRows& rows) {
    const auto R = static_cast<size_t>(rows.num_rows);
    query_start = 0;
    context_len = R + 1;
    block_table = context_len + R;
    total = block_table + R * static_cast<size_t>(rows.max_blocks);
  }
};
}  // namespace

RowsSummary summarize_rows(const ops::AttentionRows& rows) {
  RowsSummary s;
  for (int r = 0; r < rows.num_rows; ++r) {
    const int n = rows.query_start[r + 1] - rows.query_start[r];
    if (n == 1) {
      ++s.decode_rows;
      s.max_decode_context = std::max(s.max_decode_context, rows.context_len[r]);
    } else if (n > 1) {
      ++s.other_rows;
    }
  }
  return s;
}

size_t packed_rows_bytes(const ops::AttentionRows& rows) {
  return Packed(rows).total * sizeof(int32_t);
}

ops::AttentionRows upload_rows(const ops::AttentionRows& rows, void* dst) {
  ops::AttentionRows view;
  view.num_rows = rows.num_rows;
  view.max_blocks = rows.max_blocks;
  if (rows.num_rows == 0) return view;
  const Packed p(rows);
  const auto R = static_cast<size_t>(rows.num_rows);
  std::vector<int32_t> host(p.total);
  std::memcpy(host.data() + p.query_start, rows.query_start, (R + 1) * sizeof(int32_t));
  std::memcpy(host.data() + p.context_len, rows.context_len, R * sizeof(int32_t));
  if (rows.max_blocks > 0)
    std::memcpy(host.data() + p.block_table, rows.block_table,
                R * static_cast<size_t>(rows.max_blocks) * sizeof(int32_t));
  copy_to_device(dst, host.data(), host.size() * sizeof(int32_t));
  auto* base = static_cast<int32_t*>(dst);
  view.query_start = base + p.query_start;
  view.context_len = base + p.context_len;
  view.block_table = base + p.block_table;
  return view;
}

void DeviceRows::upload(const ops::AttentionRows& rows) {
  const size_t bytes = packed_rows_bytes(rows);
  if (bytes > buffer_.size()) {
    // Kernels queued earlier may still read the old buffer: wait before it is freed.
    RINGLM_CUDA_CHECK(cudaStreamSynchronize(Context::get().stream()));
    buffer_ = DeviceBuffer(bytes + bytes / 2);
    ++generation_;
  }
  view_ = upload_rows(rows, buffer_.data());
  summary_ = summarize_rows(rows);
}

void DeviceRows::upload_table_bounded(const ops::AttentionRows& rows, int block_tokens) {
  upload(rows);
  if (summary_.decode_rows > 0) summary_.max_decode_context = rows.max_blocks * block_tokens;
}

}  // namespace ringlm::cuda
