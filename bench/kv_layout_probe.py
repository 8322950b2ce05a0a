#!/usr/bin/env python3
"""Probe (GPU machine, CuPy): does the paged K/V layout cost DRAM bandwidth in decode attention?
ringlm's pages are token-major, [16 tokens][8 kv heads][128 dims] bf16, so one head's tile is 16
runs of 256 B at a 2 KB stride; a head-major page ([8 heads][16 tokens][128 dims]) makes it one
4 KB run. Each block reads one head of a range of pages (as a decode block reads one kv head of
its part), 128 threads, 4 pages in flight per thread; prints TB/s for both layouts and a plain
contiguous read of the same bytes."""
import cupy as cp

src = r'''
extern "C" __global__ void read_pages(const uint4* pages, long long n_pages, int pages_per_block,
                                      int head_major, unsigned long long* sink) {
  const int head = blockIdx.y;
  const long long first = (long long)blockIdx.x * pages_per_block;
  const int t = threadIdx.x, token = t / 16, chunk = t % 16;  // 8 tokens x 16 chunks of 16 B
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int p0 = 0; p0 < pages_per_block; p0 += 4) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long page = first + p0 + u;
      if (page >= n_pages) { v[2*u] = v[2*u+1] = make_uint4(0,0,0,0); continue; }
      const uint4* base = pages + page * 2048;  // 32 KB per page = 2048 uint4
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tok = token + 8 * h;
        const long long off = head_major ? (long long)head * 256 + tok * 16 + chunk
                                         : (long long)tok * 128 + head * 16 + chunk;
        v[2*u+h] = __ldcs(base + off);
      }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) { acc.x ^= v[i].x; acc.y ^= v[i].y; acc.z ^= v[i].z; acc.w ^= v[i].w; }
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678u) atomicAdd(sink, 1ull);
}
'''
kernel = cp.RawKernel(src, "read_pages")
n_pages = 4 << 30 >> 15  # 4 GiB of pages
pages = cp.zeros(n_pages * 2048 * 4, dtype=cp.uint32)
sink = cp.zeros(1, dtype=cp.uint64)
for per_block in (8, 32, 128):
    blocks = (n_pages + per_block - 1) // per_block
    for head_major in (0, 1):
        args = (pages, cp.int64(n_pages), cp.int32(per_block), cp.int32(head_major), sink)
        kernel((blocks, 8), (128,), args)
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(10):
            kernel((blocks, 8), (128,), args)
        stop.record()
        stop.synchronize()
        ms = cp.cuda.get_elapsed_time(start, stop) / 10
        print(f"pages per block {per_block:4d}, {'head-major ' if head_major else 'token-major'}:"
              f" {n_pages * 32768 / ms / 1e9:.3f} TB/s")
