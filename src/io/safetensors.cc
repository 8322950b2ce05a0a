// One .safetensors file: header validation and a read-only mapping (see safetensors.h), and the
// writer. The header is read with pread; tensor bytes are only reached through the mapping, so
// opening a file touches the header pages alone.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace ringlm::io {
namespace {

using nlohmann::json;

// Real headers are kilobytes to a few megabytes; a larger length is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::string errno_text(int err) {
  return std::strerror(err);
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors file '" + path + "': " + what);
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& tensor,
                              const std::string& what) {
  throw Error("safetensors file '" + path + "': tensor '" + tensor + "': " + what);
}

std::string json_type(const json& value) {
  return value.type_name();
}

std::string range_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `size` bytes at `offset`; false on a short read (file shorter than claimed).
bool pread_all(int fd, void* out, size_t size, uint64_t offset, int* err) {
  auto* dst = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t got = ::pread(fd, dst, size, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (got == 0) {
      *err = 0;
      return false;
    }
    dst += got;
    size -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// Rejects duplicate top-level keys, which nlohmann would silently collapse (last one wins).
json parse_header(const std::string& path, const std::string& text) {
  std::set<std::string> seen;
  std::string duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, callback);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) fail_tensor(path, duplicate, "appears twice in the header");
  if (!header.is_object()) fail(path, "header must be a JSON object, got " + json_type(header));
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& value) {
  std::map<std::string, std::string> out;
  if (value.is_null()) return out;
  if (!value.is_object()) fail(path, "__metadata__ must be an object, got " + json_type(value));
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail(path, "__metadata__ value of '" + key + "' must be a string, got " + json_type(item));
    out[key] = item.get<std::string>();
  }
  return out;
}

// Validates one header entry against the data section of `data_size` bytes.
TensorInfo parse_entry(const std::string& path, const std::string& name, const json& entry,
                       uint64_t data_size) {
  if (!entry.is_object())
    fail_tensor(path, name, "entry must be a JSON object, got " + json_type(entry));
  TensorInfo info;
  info.name = name;
  info.file = path;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) fail_tensor(path, name, "missing 'dtype'");
  if (!dtype_it->is_string())
    fail_tensor(path, name, "'dtype' must be a string, got " + json_type(*dtype_it));
  const std::string dtype_text = dtype_it->get<std::string>();
  const std::optional<DType> dtype = dtype_from_safetensors(dtype_text);
  if (!dtype)
    fail_tensor(
        path, name,
        "dtype '" + dtype_text + "' is not supported (ringlm loads F32, BF16, F16, I32, U8, U32)");
  info.dtype = *dtype;

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) fail_tensor(path, name, "missing 'shape'");
  if (!shape_it->is_array())
    fail_tensor(path, name, "'shape' must be an array, got " + json_type(*shape_it));
  // Element count with overflow checks; zero dims are skipped so that later stride products of
  // the non-zero dims cannot overflow either.
  uint64_t numel = 1, nonzero_product = 1;
  bool has_zero = false;
  for (const json& dim : *shape_it) {
    if (!dim.is_number_integer())
      fail_tensor(path, name, "'shape' entries must be integers, got " + json_type(dim));
    if (!dim.is_number_unsigned())
      fail_tensor(path, name, "negative dimension " + dim.dump() + " in shape " + shape_it->dump());
    const uint64_t d = dim.get<uint64_t>();
    if (d == 0) has_zero = true;
    if (d != 0 && (__builtin_mul_overflow(nonzero_product, d, &nonzero_product) ||
                   nonzero_product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail_tensor(path, name, "shape " + shape_it->dump() + " has too many elements");
    info.shape.push_back(static_cast<int64_t>(d));
  }
  numel = has_zero ? 0 : nonzero_product;

  const auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) fail_tensor(path, name, "missing 'data_offsets'");
  const json& offsets = *offsets_it;
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail_tensor(
        path, name,
        "'data_offsets' must be two non-negative integers [begin, end], got " + offsets.dump());
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  if (info.begin > info.end)
    fail_tensor(path, name,
                "data_offsets " + range_text(info.begin, info.end) + " have begin > end");

  const uint64_t elem = dtype_size(info.dtype);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(numel, elem, &expected) || expected != info.end - info.begin)
    fail_tensor(path, name,
                "shape " + shape_text(info.shape) + " x " + std::string(dtype_name(info.dtype)) +
                    " (" + std::to_string(elem) + " bytes) needs " + std::to_string(numel * elem) +
                    " bytes but data_offsets " + range_text(info.begin, info.end) + " span " +
                    std::to_string(info.end - info.begin) + " bytes");
  if (info.end > data_size)
    fail_tensor(path, name,
                "data_offsets " + range_text(info.begin, info.end) +
                    " extend past the end of the data section (" + std::to_string(data_size) +
                    " bytes): the file is truncated or its header is corrupt");
  return info;
}

void check_no_overlap(const std::string& path, const std::map<std::string, TensorInfo>& tensors) {
  std::vector<const TensorInfo*> sorted;
  for (const auto& [name, info] : tensors)
    if (info.end > info.begin) sorted.push_back(&info);  // empty ranges hold no bytes
  std::sort(sorted.begin(), sorted.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const TensorInfo& prev = *sorted[i - 1];
    const TensorInfo& cur = *sorted[i];
    if (cur.begin < prev.end)
      fail(path, "tensors '" + prev.name + "' " + range_text(prev.begin, prev.end) + " and '" +
                     cur.name + "' " + range_text(cur.begin, cur.end) + " overlap");
  }
}

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + errno_text(errno));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8)
    fail(path,
         "file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");

  unsigned char length_bytes[8];
  int err = 0;
  if (!pread_all(fd, length_bytes, 8, 0, &err))
    fail(path, "cannot read the header length: " + (err ? errno_text(err) : "short read"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | length_bytes[i];  // little-endian
  if (header_len > file_size - 8)
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the " +
                   std::to_string(file_size) + "-byte file (truncated or corrupt)");
  if (header_len > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_len) + " exceeds the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit");

  std::string text(header_len, '\0');
  if (!pread_all(fd, text.data(), header_len, 8, &err))
    fail(path, "cannot read the header: " + (err ? errno_text(err) : "short read"));
  const json header = parse_header(path, text);

  data_offset_ = static_cast<size_t>(8 + header_len);
  const uint64_t data_size = file_size - 8 - header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      metadata_ = parse_metadata(path, entry);
      continue;
    }
    tensors_.emplace(name, parse_entry(path, name, entry, data_size));
  }
  check_no_overlap(path, tensors_);

  // MAP_PRIVATE + PROT_READ and no MAP_POPULATE: pages are read only when a kernel touches them.
  void* map = ::mmap(nullptr, static_cast<size_t>(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) fail(path, "cannot mmap: " + errno_text(errno));
  map_ = static_cast<const std::byte*>(map);
  map_size_ = static_cast<size_t>(file_size);
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(path_, "missing tensor '" + name + "'");
  const TensorInfo& info = it->second;
  if (info.shape.size() > static_cast<size_t>(kMaxDims))
    fail_tensor(path_, name,
                "has " + std::to_string(info.shape.size()) +
                    " dimensions; ringlm tensors have at most " + std::to_string(kMaxDims));
  // The Tensor view is mutable by type; the pages are PROT_READ, so weights stay immutable.
  void* data = const_cast<std::byte*>(map_ + data_offset_ + info.begin);
  return Tensor::contiguous(data, info.dtype, info.shape.data(),
                            static_cast<int>(info.shape.size()), Device::CPU);
}

}  // namespace ringlm::io
