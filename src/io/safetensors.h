// safetensors checkpoints mapped into memory, zero-copy. Opening a file reads and validates only
// its JSON header; tensor bytes are touched when a kernel reads them (so `ringlm inspect` on a 100
// GB checkpoint reads kilobytes). Weights are owned by their mapping: a Tensor from here stays
// valid as long as the SafetensorsFile / WeightStore lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace ringlm::io {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section (after the header)
  uint64_t end = 0;
  std::string file;  // path of the file holding it

  uint64_t nbytes() const { return end - begin; }
  uint64_t numel() const;  // product of shape (1 for a scalar)
};

// One mapped .safetensors file. Throws ringlm::Error naming the file (and tensor) when the header
// is not valid JSON, a dtype is unknown, shape × dtype size != byte range, a range leaves the file,
// or two ranges overlap. The mapping is read-only: writing through a returned Tensor faults.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // A view of the mapped bytes; throws naming the file when the tensor is absent.
  Tensor get(const std::string& name) const;

 private:
  std::string path_;
  const std::byte* map_ = nullptr;
  size_t map_size_ = 0;
  size_t data_offset_ = 0;  // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All weights of a checkpoint directory: model.safetensors, or the shards listed by
// model.safetensors.index.json (every index entry must exist in its shard and every shard must
// exist), or every *.safetensors file in the directory when there is no index.
class WeightStore {
 public:
  explicit WeightStore(const std::string& model_dir);

  bool has(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws "missing tensor NAME in DIR" if absent
  // From now on get() returns tensors on `device`: each is copied there on its first get() and
  // kept (owned by the store) for the store's lifetime. CPU (the default) returns the mapping.
  void set_device(Device device);
  Device device() const { return device_; }
  // On a device: uploads `names` (tensors of one dtype, none uploaded yet) back to back into one
  // allocation, so that get() returns adjacent tensors, which a backend can multiply as one
  // matrix (the q, k and v projections, gate and up). Returns whether it did; otherwise (CPU,
  // a name missing or already uploaded, dtypes differ, a size before the last not a multiple of
  // 256 bytes) nothing changes and get() uploads each tensor alone as before.
  bool place_together(const std::vector<std::string>& names) const;
  const TensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::string& dir() const { return dir_; }
  // The mapped files, in load order (index shards sorted by name, or the directory's files).
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  uint64_t total_bytes() const;  // sum of tensor byte sizes
  // Sum of element counts (packed quantized tensors count codes).
  uint64_t total_parameters() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> owner_;
  Device device_ = Device::CPU;
  struct Uploaded {
    DeviceMemory memory;
    Tensor tensor;
  };
  mutable std::mutex uploads_mutex_;
  mutable std::map<std::string, Uploaded> uploads_;
};

// Writes tensors to a .safetensors file (header sorted by name, 8-byte aligned data section, data
// ordered by dtype size then name so every tensor is aligned to its element size). Writes a
// temporary file next to `path` and renames it, so readers never see a partial file. Used by the
// random-model tool, KV persistence and tests.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // numel × dtype_size bytes
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace ringlm::io
