// The tensor-core decode kernel over 16-bit K/V (device/attention_decode_tc.cuh), persistent: a
// grid that fits on the SMs at once walks the tasks (task k = part · tasks per part + x; block b
// takes its tasks b, b + grid, ... that are active), and each warp's two-stage cp.async pipeline
// runs across the block's tasks: the first tile of the next task is in flight while the current
// task's last tile is consumed and its partials merged. With one task per block, every block
// started with its table lookups' and first tiles' latency and nothing else in flight — at 512
// context a warp has 3 tiles per task, so that start was a large part of each block's life.
// Per task the operations are decode_tc_kernel's in its order: the same bits, whichever kernel
// and grid run a row.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/decode_tc_common.cuh"
#include "backends/cuda/device/decode_tc_tile.cuh"
#include "backends/cuda/device/decode_tiles.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/runtime.h"

namespace ringlm::cuda {
void count_persistent_decode_launch();  // attention.cu (cuda_ops.h decode_persistent_launches)
}  // namespace ringlm::cuda

namespace ringlm::cuda::device {

// Rows whose tables (query_start, context_len) the block keeps in shared memory: looking a task
// up is then a few shared loads, so inactive tasks (parts past a short row's last, prefill rows)
// cost nearly nothing to skip.
constexpr int kPersistentMaxRows = 256;

struct PersistentTables {
  int32_t query_start[kPersistentMaxRows + 1];
  int32_t context_len[kPersistentMaxRows];
};

// The first active task at or after task k among this block's (k, k + grid, ...); an inactive
// task when none is left.
__device__ __forceinline__ TcDecodeTask next_active_task(const AttnArgs& a, int k,
                                                         const PersistentTables& tables) {
  const int per_part = tc_decode_tasks_per_part(a), total = per_part * a.max_parts;
  for (; k < total; k += static_cast<int>(gridDim.x)) {
    const TcDecodeTask task(a, k % per_part, k / per_part, tables.query_start, tables.context_len);
    if (task.active) return task;
  }
  return TcDecodeTask();
}

template <typename Source, int kD>
__global__ void __launch_bounds__(kTcDecodeThreads, Source::kMinBlocks)
    decode_tc_persistent_kernel(const AttnArgs a, const Source src) {
  static_assert(Source::kStages == 2, "cp.async tile sources only");
  using T = typename Source::T;
  using Tile = TcTile<T, kD>;
  static_assert(sizeof(TcWarpPartial<kD>) <= sizeof(Tile), "a warp's partial fits in a stage");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ PersistentTables tables;
  __shared__ int free_stage[kTcDecodeWarps];  // per warp: the stage its partial goes to
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  Tile* const all_stages = reinterpret_cast<Tile*>(smem);
  Tile* const stages = all_stages + 2 * warp;

  // Host-uploaded tables: read before the wait, like the first tiles of older keys.
  for (int i = static_cast<int>(threadIdx.x); i <= a.num_rows; i += kTcDecodeThreads) {
    tables.query_start[i] = a.query_start[i];
    if (i < a.num_rows) tables.context_len[i] = a.context_len[i];
  }
  __syncthreads();
  TcDecodeTask task = next_active_task(a, static_cast<int>(blockIdx.x), tables);
  if (!task.active) return;
  auto row_of = [&](const TcDecodeTask& owner, int t) {
    return owner.row(a, owner.tile_start(t) + (lane & (kTcKeys - 1)));
  };
  int stage = 0;           // the stage of this warp's next tile
  bool in_flight = false;  // that tile's copies are out
  if (a.early_fetch && task.tiles > 0 && task.settled(0)) {
    src.fetch(row_of(task, 0), lane, stages[0]);
    in_flight = true;
  }
  wait_prior_grid();
  launch_dependents();

  uint32_t qf[kD / 16][2];
  tc_load_q<T, kD>(a, task, lane, qf);
  // The partials of warp w go to its stage that has no copies in flight.
  auto regions = [&](int w) -> TcWarpPartial<kD>& {
    return *reinterpret_cast<TcWarpPartial<kD>*>(all_stages + 2 * w + free_stage[w]);
  };
  for (;;) {
    if (!in_flight && task.tiles > 0) src.fetch(row_of(task, 0), lane, stages[stage]);
    cp_async_commit();
    TcOnlineSoftmax<T, kD> soft;
    // The block's next task, its first row and q: looked up once this task's second tile is out.
    TcDecodeTask next;
    int next_row = -1;
    uint32_t next_qf[kD / 16][2];
    auto look_ahead = [&] {
      next = next_active_task(
          a, task.part * tc_decode_tasks_per_part(a) + task.x + static_cast<int>(gridDim.x),
          tables);
      if (!next.active) return;
      next_row = row_of(next, 0);
      tc_load_q<T, kD>(a, next, lane, next_qf);
    };
    bool next_in_flight = false;
    int row_next = row_of(task, 1);
    for (int t = 0; t < task.tiles; ++t) {
      if (t + 1 < task.tiles) src.fetch(row_next, lane, stages[stage ^ 1]);
      if (t == 0) look_ahead();
      if (t + 1 == task.tiles && next.active && next.tiles > 0) {
        src.fetch(next_row, lane, stages[stage ^ 1]);
        next_in_flight = true;
      }
      row_next = row_of(task, t + 2);
      cp_async_commit();
      cp_async_wait<1>();  // tile t has landed (this lane's copies) ...
      __syncwarp();        // ... and every lane's
      tc_consume_tile<T, kD>(a, stages[stage], qf, soft, task.tile_start(t), task.last, lane);
      __syncwarp();  // every lane is done with this stage before it is refilled
      stage ^= 1;
    }
    if (task.tiles == 0) look_ahead();
    if (lane == 0) free_stage[warp] = stage ^ 1;  // tc_finish_task syncs before reading it
    tc_finish_task<T, kD>(a, task, soft, regions, lane);
    __syncthreads();  // every thread has read the partials before their stages are refilled
    if (!next.active) break;
    task = next;
    in_flight = next_in_flight;
#pragma unroll
    for (int s = 0; s < kD / 16; ++s) qf[s][0] = next_qf[s][0], qf[s][1] = next_qf[s][1];
  }
  cp_async_wait<0>();
}

// Blocks of decode_tc_persistent_kernel<Source, kD> that the SMs hold at once.
template <typename Source, int kD>
int persistent_capacity(size_t smem) {
  static const int capacity = [smem] {
    int per_sm = 0;
    RINGLM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, decode_tc_persistent_kernel<Source, kD>, kTcDecodeThreads, smem));
    return std::max(1, per_sm) * sm_count();
  }();
  return capacity;
}

// Launches the persistent kernel when it applies (a 16-bit cp.async source, the tasks outnumber
// the grid, the tables fit, no in-kernel merge) and says whether it did.
template <typename Source, int kD>
bool launch_decode_tc_persistent(const AttnArgs& args, const Source& source, cudaStream_t stream) {
  // Head dim 256 (one block per SM) spills registers with the next task's q held ahead: not
  // measured, so not used.
  if constexpr (Source::kStages != 2 || kD > 128) {
    return false;
  } else {
    if (args.persistent_blocks == 0 || args.num_rows > kPersistentMaxRows ||
        args.merge_tickets != nullptr)
      return false;
    constexpr size_t kSmem = sizeof(TcTile<typename Source::T, kD>) * 2 * kTcDecodeWarps;
    static const bool configured = [] {
      RINGLM_CUDA_CHECK(cudaFuncSetAttribute(decode_tc_persistent_kernel<Source, kD>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kSmem)));
      return true;
    }();
    (void)configured;
    const int64_t tasks = int64_t{tc_decode_tasks_per_part(args)} * args.max_parts;
    const int blocks = args.persistent_blocks > 0 ? args.persistent_blocks
                                                  : persistent_capacity<Source, kD>(kSmem);
    if (tasks <= blocks) return false;
    launch_pdl(decode_tc_persistent_kernel<Source, kD>, dim3(static_cast<unsigned>(blocks)),
               dim3(kTcDecodeThreads), kSmem, stream, args, source);
    check_launch("decode_tc_persistent_kernel");
    count_persistent_decode_launch();
    return true;
  }
}

}  // namespace ringlm::cuda::device
