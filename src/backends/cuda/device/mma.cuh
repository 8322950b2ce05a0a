// Tensor-core building blocks (sm_80+ mma.sync, used on Hopper too): 16-bit pairs, the
// m16n8k16 MMA with f32 accumulation, and transposed 8 × 8 matrix loads from shared memory.
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16/.f16), lane = 4·g + c:
//   A (16 × 16, row-major) regs: {(g, 2c..2c+1)}, {(g+8, 2c..)}, {(g, 2c+8..)}, {(g+8, 2c+8..)}
//   B (16 × 8, "col")      regs: {(k = 2c..2c+1, n = g)}, {(k = 2c+8..2c+9, n = g)}
//   C/D (16 × 8, f32):      (g, 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace ringlm::cuda::device {

// Two floats as a packed 16-bit pair (x in the low half: the lower column of an mma fragment).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float x, float y);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&p);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
  const __half2 p = __floats2half2_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&p);
}

// d (16 × 8, f32) += a (16 × 16) · b (16 × 8).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Four 8 × 8 16-bit matrices from shared memory, transposed (the B operand of P·V).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

}  // namespace ringlm::cuda::device
