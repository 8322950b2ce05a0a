// Hopper warpgroup MMA (wgmma, sm_90a) and the tensor-memory-access copy (TMA) with mbarriers,
// as used by stream_gemm.cu. Device-only; everything here compiles only for the sm_90a target
// (__CUDA_ARCH_FEAT_SM90_ALL); for the compute_90 PTX target they are no-ops, so kernels using
// them compute nothing there and the host launches them only on sm_90 (stream_gemm_applies).
//
// wgmma_m64k16<N, T>: D[64, N] (f32, registers) += A[64, 16] · B[16, N]ᵀ, A and B 16-bit
// K-major tiles in shared memory named by descriptors (smem_descriptor). D's fragment: thread
// (warp w of the warpgroup, lane l) holds d[4j + 2h + b] = D[16w + l/4 + 8h][8j + 2(l%4) + b].
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace ringlm::cuda::device {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define RINGLM_WGMMA_AVAILABLE 1
#endif

template <int N, typename T>
struct Wgmma;

// The accumulator operands d[i], d[i + 1], ... of the asm statements below.
#define RINGLM_WGMMA_D8(i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define RINGLM_WGMMA_D16(i) RINGLM_WGMMA_D8(i), RINGLM_WGMMA_D8(i + 8)
#define RINGLM_WGMMA_D32(i) RINGLM_WGMMA_D16(i), RINGLM_WGMMA_D16(i + 16)
#define RINGLM_WGMMA_D64(i) RINGLM_WGMMA_D32(i), RINGLM_WGMMA_D32(i + 32)
#define RINGLM_WGMMA_D96(i) RINGLM_WGMMA_D64(i), RINGLM_WGMMA_D32(i + 64)
#define RINGLM_WGMMA_D128(i) RINGLM_WGMMA_D64(i), RINGLM_WGMMA_D64(i + 64)
// Their operand numbers as the instruction's register list.
#define RINGLM_WGMMA_R16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define RINGLM_WGMMA_R32 \
  RINGLM_WGMMA_R16       \
  ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define RINGLM_WGMMA_R64                                                             \
  RINGLM_WGMMA_R32                                                                   \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define RINGLM_WGMMA_R96                                                             \
  RINGLM_WGMMA_R64                                                                   \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define RINGLM_WGMMA_R128                                                                        \
  RINGLM_WGMMA_R96                                                                               \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, " \
  "%127"

// d (+)= a · bᵀ for one shape and type: operands A and B are the descriptors, P the flag that
// keeps d (0: d = a · bᵀ); the D operands come last.
#ifdef RINGLM_WGMMA_AVAILABLE
#define RINGLM_WGMMA_ISSUE(N, PTX, REGS, A, B, P, ...)                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P                                           \
               ", 0;\n"                                                                          \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " {" REGS "}, %" #A \
               ", %" #B ", p, 1, 1, 0, 0;\n}\n"                                                  \
               : __VA_ARGS__                                                                     \
               : "l"(a), "l"(b), "r"(accumulate))
#else
#define RINGLM_WGMMA_ISSUE(...) (void)d, (void)a, (void)b, (void)accumulate
#endif

// Wgmma<N, bf16> and Wgmma<N, half>: COUNT = N / 2 accumulators per thread, the descriptors
// and the flag operands COUNT, COUNT + 1 and COUNT + 2 (numerals: the asm text names them).
#define RINGLM_WGMMA_SHAPE(N, COUNT, REGS, A, B, P, OPERANDS)                             \
  template <>                                                                             \
  struct Wgmma<N, __nv_bfloat16> {                                                        \
    static __device__ __forceinline__ void run(float (&d)[COUNT], uint64_t a, uint64_t b, \
                                               int accumulate) {                          \
      RINGLM_WGMMA_ISSUE(N, "bf16", REGS, A, B, P, OPERANDS);                             \
    }                                                                                     \
  };                                                                                      \
  template <>                                                                             \
  struct Wgmma<N, __half> {                                                               \
    static __device__ __forceinline__ void run(float (&d)[COUNT], uint64_t a, uint64_t b, \
                                               int accumulate) {                          \
      RINGLM_WGMMA_ISSUE(N, "f16", REGS, A, B, P, OPERANDS);                              \
    }                                                                                     \
  };

RINGLM_WGMMA_SHAPE(32, 16, RINGLM_WGMMA_R16, 16, 17, 18, RINGLM_WGMMA_D16(0))
RINGLM_WGMMA_SHAPE(64, 32, RINGLM_WGMMA_R32, 32, 33, 34, RINGLM_WGMMA_D32(0))
RINGLM_WGMMA_SHAPE(128, 64, RINGLM_WGMMA_R64, 64, 65, 66, RINGLM_WGMMA_D64(0))
RINGLM_WGMMA_SHAPE(192, 96, RINGLM_WGMMA_R96, 96, 97, 98, RINGLM_WGMMA_D96(0))
RINGLM_WGMMA_SHAPE(256, 128, RINGLM_WGMMA_R128, 128, 129, 130, RINGLM_WGMMA_D128(0))

// Shared-memory matrix descriptor of a K-major tile written by TMA with 128-byte swizzle: rows of
// 64 16-bit values (128 bytes), 8-row atoms of 1,024 bytes (the stride), the tile 1,024-aligned.
// The k-th 16-wide slice of the tile starts 32·k bytes in: descriptor + 2·k.
__device__ __forceinline__ uint64_t smem_descriptor(const void* tile) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  uint64_t d = (addr & 0x3FFFFu) >> 4;
  d |= uint64_t{1} << 16;          // leading byte offset: unused for swizzled K-major tiles
  d |= uint64_t{1024 >> 4} << 32;  // stride byte offset: one 8-row atom
  d |= uint64_t{1} << 62;          // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most `kPending` of this warpgroup's committed MMA groups are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Keeps the compiler from moving accesses of an accumulator across the asynchronous MMAs.
__device__ __forceinline__ void fence_operand(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// ---- mbarriers and TMA (shared::cta addresses as 32-bit integers) ----
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned count) {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count)
               : "memory");
#else
  (void)bar, (void)count;
#endif
}
// Makes initialized barriers visible to the async proxy (TMA) before any copy completes on them.
__device__ __forceinline__ void mbarrier_init_fence() {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Arrives and announces `bytes` of TMA copies that will complete on the barrier.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
#endif
}
// Returns once the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#ifdef RINGLM_WGMMA_AVAILABLE
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
#else
  (void)bar, (void)parity;
#endif
}
// An L2 policy for data read once (the weights): evicted first, so x and the partial sums stay.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy = 0;
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}
// Copies the box at (c0 = inner coordinate, c1 = row) of `map` into shared memory at `dst`,
// completing `bar`'s announced bytes, with an L2 cache policy.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int c0, int c1,
                                            uint64_t* bar, uint64_t policy) {
#ifdef RINGLM_WGMMA_AVAILABLE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_address(bar)), "l"(policy)
      : "memory");
#else
  (void)dst, (void)map, (void)c0, (void)c1, (void)bar, (void)policy;
#endif
}

}  // namespace ringlm::cuda::device
