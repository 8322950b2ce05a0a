// write_safetensors: a header sorted by name and padded to 8 bytes, data ordered by element size so
// that every tensor is aligned to its dtype, written to a temporary file and renamed into place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace ringlm::io {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("cannot write safetensors file '" + path + "': " + what);
}

uint64_t byte_size(const std::string& path, const TensorToWrite& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) fail(path, "tensor '" + t.name + "' has negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      fail(path, "tensor '" + t.name + "' has too many elements");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(dtype_size(t.dtype)), &bytes))
    fail(path, "tensor '" + t.name + "' has too many bytes");
  return bytes;
}

// Writes all of [data, data + size); write(2) may write less than asked (and at most ~2 GiB).
bool write_all(int fd, const void* data, uint64_t size) {
  const auto* src = static_cast<const char*>(data);
  while (size > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, 1ull << 30));
    const ssize_t wrote = ::write(fd, src, chunk);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    src += wrote;
    size -= static_cast<uint64_t>(wrote);
  }
  return true;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::vector<const TensorToWrite*> order;
  std::vector<uint64_t> sizes;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      fail(path, "invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) fail(path, "tensor '" + t.name + "' given twice");
    if (byte_size(path, t) > 0 && t.data == nullptr)
      fail(path, "tensor '" + t.name + "' has no data");
    order.push_back(&t);
  }
  // Larger elements first: with the data section 8-byte aligned, every tensor then starts at a
  // multiple of its element size.
  std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    const size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  json header = json::object();  // std::map-backed: keys come out sorted by name
  uint64_t offset = 0;
  for (const TensorToWrite* t : order) {
    const uint64_t bytes = byte_size(path, *t);
    sizes.push_back(bytes);
    json entry = json::object();
    entry["dtype"] = std::string(dtype_name(t->dtype));
    entry["shape"] = t->shape;
    entry["data_offsets"] = json::array({offset, offset + bytes});
    header[t->name] = std::move(entry);
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');

  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, std::string("cannot create a temporary file: ") + std::strerror(errno));
  auto abort_write = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what + ": " + std::strerror(err));
  };
  // mkstemp creates 0600; make the result readable like an ordinary file. (umask(2) cannot be
  // read without changing it, which would race with other threads, so 0644 is fixed.)
  if (::fchmod(fd, 0644) != 0) abort_write("fchmod failed");

  unsigned char length_bytes[8];
  uint64_t len = text.size();
  for (unsigned char& b : length_bytes) {
    b = static_cast<unsigned char>(len & 0xffu);
    len >>= 8;
  }
  if (!write_all(fd, length_bytes, 8) || !write_all(fd, text.data(), text.size()))
    abort_write("writing the header failed");
  for (size_t i = 0; i < order.size(); ++i)
    if (sizes[i] > 0 && !write_all(fd, order[i]->data, sizes[i]))
      abort_write("writing tensor '" + order[i]->name + "' failed");
  if (::fsync(fd) != 0) abort_write("fsync failed");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, std::string("close failed: ") + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, std::string("rename failed: ") + std::strerror(err));
  }
}

}  // namespace ringlm::io
