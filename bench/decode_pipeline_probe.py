"""Probe (GPU machine, CuPy): is the tensor-core decode kernel's memory pipeline, or its math,
what keeps it at ~3 TB/s at short context? This kernel moves K/V exactly as
device/attention_decode_tc.cuh does for 16-bit K/V — blocks of 4 warps per (row, kv head, part),
each warp's 16-key tiles (K and V rows: 16 runs of 256 B each in token-major pages) copied by
cp.async into its own shared-memory stages, `stages` deep, the next tiles in flight while one is
"consumed" — but consuming a tile is a spin of `delay` clock cycles instead of the attention
math. Prints TB/s of K/V read for the 512-context shape (3 parts of 192 keys: 3 tiles per warp)
and the 32k one (17 parts: 30 tiles per warp), over delays, stage counts and blocks per SM; then
with the kernel's other memory traffic added: each tile's rows looked up in a page table one tile
ahead (pages shuffled per row), and each warp's q loads at its start.
Usage: [PROBE_DELAYS=0,300,...] python3 bench/decode_pipeline_probe.py"""
import os

import cupy as cp

src = r'''
extern "C" __global__ void pipeline(const unsigned short* K, const unsigned short* V, int ctx,
                                    int parts, int part_keys, int stages, int delay,
                                    const int* table, const float* q, unsigned long long* sink) {
  extern __shared__ __align__(16) unsigned short smem[];
  const int kStride = 136, kTile = 2 * 16 * kStride;  // K and V rows of one stage, padded
  const int x = blockIdx.x, part = blockIdx.y, row = x / 8, head = x % 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first = part * part_keys, last = min(ctx, first + part_keys);
  const int warp_first = first + 16 * warp;
  const int tiles = warp_first < last ? (last - warp_first + 63) / 64 : 0;
  unsigned short* my = smem + warp * stages * kTile;
  const int pages = (ctx + 15) / 16;
  // With a table (the kernel's block table): lane j's token of tile t, looked up one tile ahead
  // of its copy as the kernel does; without: computed.
  auto token_of = [&](int t) {
    const int i = warp_first + 64 * t + (lane & 15);
    if (i >= last) return -1;
    if (table == nullptr) return row * ctx + i;
    return table[row * pages + i / 16] * 16 + i % 16;
  };
  int next_token = token_of(0);
  auto fetch = [&](int t, int stage) {
    unsigned short* dst = my + stage * kTile;
    const int chunk = lane % 16;
    const int mine = next_token;
    next_token = token_of(t + 1);
    for (int j = 0; j < 8; ++j) {
      const int key = 2 * j + lane / 16;
      const int tok = __shfl_sync(0xffffffffu, mine, key);
      const bool ok = tok >= 0;
      const long long token = ok ? tok : 0;
      const long long off = (token * 8 + head) * 128 + 8 * chunk;
      const unsigned sk = (unsigned)__cvta_generic_to_shared(dst + key * kStride + 8 * chunk);
      const unsigned sv = sk + 2 * 16 * kStride;
      const int n = ok ? 16 : 0;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sk), "l"(K + off), "r"(n));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sv), "l"(V + off), "r"(n));
    }
  };
  unsigned acc = 0;
  if (q != nullptr) {  // the kernel's q fragments: 8 heads x 128 dims, float2 per lane per step
    const float* qrow = q + ((long long)row * 32 + head * 4) * 128;
    for (int s = 0; s < 8; ++s)
      for (int h = 0; h < 2; ++h) {
        const float2 x = *reinterpret_cast<const float2*>(qrow + (lane / 4) * 128 + 16 * s +
                                                           8 * h + 2 * (lane % 4));
        acc += __float_as_uint(x.x * 0.5f) ^ __float_as_uint(x.y);
      }
  }
  for (int s = 0; s < stages - 1; ++s) {
    if (s < tiles) fetch(s, s);
    asm volatile("cp.async.commit_group;");
  }
  for (int t = 0; t < tiles; ++t) {
    if (t + stages - 1 < tiles) fetch(t + stages - 1, (t + stages - 1) % stages);
    asm volatile("cp.async.commit_group;");
    if (stages == 2) asm volatile("cp.async.wait_group 1;");
    else if (stages == 3) asm volatile("cp.async.wait_group 2;");
    else asm volatile("cp.async.wait_group 3;");
    __syncwarp();
    acc += my[(t % stages) * kTile + lane * 8];
    const long long start = clock64();
    while (clock64() - start < delay) {}
    __syncwarp();
  }
  asm volatile("cp.async.wait_group 0;");
  if (acc == 0x12345678u) atomicAdd(sink, 1ull);
}
'''
kernel = cp.RawKernel(src, "pipeline", options=("-std=c++17",))
kernel.max_dynamic_shared_size_bytes = 227 * 1024
sms = cp.cuda.Device().attributes["MultiProcessorCount"]
tile_bytes = 2 * 16 * 136 * 2
# Spin cycles per tile (PROBE_DELAYS="0,300,600,1200" by default).
delays = [int(d) for d in os.environ.get("PROBE_DELAYS", "0,300,600,1200").split(",")]


def run(rows, ctx, parts, stages, delay, blocks_per_sm, use_table=False, use_q=False):
    part_keys = -(-ctx // parts)
    part_keys = -(-part_keys // 64) * 64
    tokens = rows * ctx
    K = cp.zeros(tokens * 8 * 128, dtype=cp.uint16)
    V = cp.zeros(tokens * 8 * 128, dtype=cp.uint16)
    sink = cp.zeros(1, dtype=cp.uint64)
    pages = -(-ctx // 16)
    # Each row's pages in a shuffled order over the pool (the kernel's pages are scattered).
    table = None
    if use_table:
        table = (cp.arange(rows, dtype=cp.int32)[:, None] * pages +
                 cp.random.permutation(pages).astype(cp.int32)[None, :]).ravel()
        K = cp.zeros((rows * pages * 16) * 8 * 128, dtype=cp.uint16)
        V = cp.zeros_like(K)
    q = cp.ones((rows * 32 + 8) * 128, dtype=cp.float32) if use_q else None
    smem = max(stages * 4 * tile_bytes, min(227 * 1024, (228 * 1024) // blocks_per_sm - 1024))
    null = cp.uint64(0)
    args = (K, V, cp.int32(ctx), cp.int32(parts), cp.int32(part_keys), cp.int32(stages),
            cp.int32(delay), table if use_table else null, q if use_q else null, sink)
    grid = (rows * 8, parts)
    kernel(grid, (128,), args, shared_mem=smem)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(20):
        kernel(grid, (128,), args, shared_mem=smem)
    stop.record()
    stop.synchronize()
    ms = cp.cuda.get_elapsed_time(start, stop) / 20
    return 2 * tokens * 8 * 128 * 2 / ms / 1e9


print(f"SMs {sms}; TB/s of K/V read (16-key tiles, 4 warps per block)")
print("shape        stages blocks/SM delay(cycles): " + " ".join(f"{d:6d}" for d in delays))
for rows, ctx, parts, label in ((64, 516, 3, "512 x 64"), (256, 516, 3, "512 x 256"),
                                (16, 32772, 17, "32k x 16")):
    for stages, per_sm in ((2, 3), (3, 2), (2, 2), (4, 1)):
        rates = [run(rows, ctx, parts, stages, d, per_sm) for d in delays]
        print(f"{label:12s} {stages:6d} {per_sm:9d}                " +
              " ".join(f"{r:6.2f}" for r in rates))
print("with the kernel's table lookups (t) and q loads (q): 2 stages, 3 blocks per SM")
print("shape        extras     delay(cycles): " + " ".join(f"{d:6d}" for d in delays))
for rows, ctx, parts, label in ((64, 516, 3, "512 x 64"), (256, 516, 3, "512 x 256"),
                                (16, 32772, 17, "32k x 16")):
    for use_table, use_q in ((True, False), (False, True), (True, True)):
        rates = [run(rows, ctx, parts, 2, d, 3, use_table, use_q) for d in delays]
        extras = ("t" if use_table else "") + ("q" if use_q else "")
        print(f"{label:12s} {extras:10s}                " + " ".join(f"{r:6.2f}" for r in rates))
