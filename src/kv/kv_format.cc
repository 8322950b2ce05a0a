#include "kv/kv_format.h"

#include "core/error.h"
#include "kv/turbo_codec.h"

namespace ringlm::kv {

namespace {
constexpr const char* kFormatNames =
    "f32, bf16, f16, int8-g32, int8-g64, int4-g32, int4-g64, turbo (= turbo:k8v3), "
    "turbo:kXvY with X in {2,4,5,8} and Y in {2,3,4,5,8}";
}  // namespace

KvFormat KvFormat::parse(const std::string& name) {
  if (name == "f32") return dense(DType::F32);
  if (name == "bf16") return dense(DType::BF16);
  if (name == "f16") return dense(DType::F16);
  for (int bits : {8, 4}) {
    for (int group : {32, 64}) {
      if (name == "int" + std::to_string(bits) + "-g" + std::to_string(group))
        return affine(bits, group);
    }
  }
  if (name == "turbo") return turbo(8, 3);
  for (int kb : {2, 4, 5, 8}) {
    for (int vb : {2, 3, 4, 5, 8}) {
      if (name == "turbo:k" + std::to_string(kb) + "v" + std::to_string(vb)) return turbo(kb, vb);
    }
  }
  RINGLM_USER_CHECK(false, "unknown KV format '", name, "' (supported: ", kFormatNames, ")");
  return {};
}

std::string KvFormat::name() const {
  if (encoding == KvEncoding::Dense) {
    switch (dtype) {
      case DType::F32:
        return "f32";
      case DType::BF16:
        return "bf16";
      case DType::F16:
        return "f16";
      default:
        return "dense-" + std::string(dtype_name(dtype));
    }
  }
  if (encoding == KvEncoding::Turbo)
    return "turbo:k" + std::to_string(bits) + "v" + std::to_string(value_bits);
  std::string n = "int" + std::to_string(bits) + "-g" + std::to_string(group_size);
  if (dtype != DType::BF16) n += "-" + std::string(dtype_name(dtype));  // not a parseable format
  return n;
}

size_t KvFormat::bytes_per_token(int kv_heads, int head_dim, bool value) const {
  const auto values = static_cast<size_t>(kv_heads) * static_cast<size_t>(head_dim);
  if (encoding == KvEncoding::Dense) return values * dtype_size(dtype);
  if (encoding == KvEncoding::Turbo) {
    const size_t groups = values / static_cast<size_t>(kTurboGroup), f16 = 2;
    if (value) return values * static_cast<size_t>(value_bits) / 8 + groups * f16;
    return values * static_cast<size_t>(bits) / 8 + 2 * groups * f16;
  }
  if (group_size <= 0) return 0;  // not a valid affine format (check_supported says so)
  const size_t groups = values / static_cast<size_t>(group_size);
  return values * static_cast<size_t>(bits) / 8 + 2 * groups * dtype_size(dtype);
}

void KvFormat::check_supported(int head_dim) const {
  RINGLM_USER_CHECK(head_dim > 0, "KV format ", name(), ": head_dim ", head_dim,
                    " is not positive");
  if (encoding == KvEncoding::Dense) {
    RINGLM_USER_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16,
                      "KV format ", name(), ": dense KV must be f32, bf16 or f16");
    return;
  }
  if (encoding == KvEncoding::Turbo) {
    RINGLM_USER_CHECK(group_size == kTurboGroup && dtype == DType::F16, "KV format ", name(),
                      " is not supported (supported: ", kFormatNames, ")");
    validate_turbo(bits, value_bits, head_dim);
    return;
  }
  RINGLM_USER_CHECK(
      (bits == 4 || bits == 8) && (group_size == 32 || group_size == 64) && dtype == DType::BF16,
      "KV format ", name(), " is not supported (supported: ", kFormatNames, ")");
  RINGLM_USER_CHECK(head_dim % group_size == 0, "KV format ", name(), ": head_dim ", head_dim,
                    " is not a multiple of the group size ", group_size,
                    " (affine KV quantizes groups along head_dim, as MLX)");
}

}  // namespace ringlm::kv
