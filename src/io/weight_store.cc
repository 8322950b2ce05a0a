// WeightStore: the safetensors files of a checkpoint directory behind one name -> tensor lookup.
// With model.safetensors.index.json the index is the contract: every shard it names must exist and
// every tensor it places in a shard must be there. Without one, every *.safetensors file is loaded.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/safetensors.h"

namespace ringlm::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "'");
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path.string() + "'");
  return os.str();
}

// Shard names are file names relative to the checkpoint; anything escaping it is a bad index.
bool is_safe_relative(const std::string& name) {
  if (name.empty()) return false;
  const fs::path p(name);
  if (p.is_absolute()) return false;
  for (const fs::path& part : p)
    if (part == "..") return false;
  return true;
}

// tensor name -> shard file name, from the index's "weight_map".
std::map<std::string, std::string> read_index(const fs::path& index_path) {
  const std::string where = "index '" + index_path.string() + "'";
  json index;
  try {
    index = json::parse(read_text(index_path));
  } catch (const json::exception& e) {
    throw Error(where + " is not valid JSON: " + e.what());
  }
  if (!index.is_object()) throw Error(where + " must be a JSON object");
  const auto map_it = index.find("weight_map");
  if (map_it == index.end()) throw Error(where + " has no 'weight_map'");
  if (!map_it->is_object())
    throw Error(where + ": 'weight_map' must be an object, got " + map_it->type_name());
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string())
      throw Error(where + ": weight_map entry for tensor '" + tensor +
                  "' must be a file name, got " + shard.type_name());
    std::string file = shard.get<std::string>();
    if (!is_safe_relative(file))
      throw Error(where + ": tensor '" + tensor + "' is placed in shard '" + file +
                  "', which is not a file inside the checkpoint directory");
    out[tensor] = std::move(file);
  }
  return out;
}

std::vector<std::string> list_safetensors(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0 &&
        name[0] != '.' && entry.is_regular_file(ec))
      names.push_back(name);
  }
  if (ec) throw Error("cannot list model directory '" + dir.string() + "': " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

WeightStore::WeightStore(const std::string& model_dir) : dir_(model_dir) {
  const fs::path dir(model_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("model directory '" + model_dir + "' does not exist or is not a directory");

  const fs::path index_path = dir / kIndexName;
  const bool has_index = fs::exists(index_path, ec);
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;
  if (has_index) {
    weight_map = read_index(index_path);
    std::set<std::string> unique;
    for (const auto& [tensor, shard] : weight_map) unique.insert(shard);
    shards.assign(unique.begin(), unique.end());
    for (const std::string& shard : shards)
      if (!fs::is_regular_file(dir / shard, ec))
        throw Error("index '" + index_path.string() + "' lists shard '" + shard + "', but '" +
                    (dir / shard).string() + "' does not exist");
    if (shards.empty()) throw Error("index '" + index_path.string() + "' lists no tensors");
  } else {
    shards = list_safetensors(dir);
    if (shards.empty())
      throw Error("no .safetensors files in model directory '" + model_dir + "' (expected " +
                  "model.safetensors or " + kIndexName + ")");
  }

  std::map<std::string, const SafetensorsFile*> by_shard;
  for (const std::string& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>((dir / shard).string()));
    const SafetensorsFile* file = files_.back().get();
    by_shard[shard] = file;
    for (const auto& [name, info] : file->tensors()) {
      const auto [it, inserted] = owner_.emplace(name, file);
      if (!inserted)
        throw Error("tensor '" + name + "' is in both '" + it->second->path() + "' and '" +
                    file->path() + "'");
    }
  }
  for (const auto& [tensor, shard] : weight_map)
    if (!by_shard.at(shard)->has(tensor))
      throw Error("index '" + index_path.string() + "' says tensor '" + tensor + "' is in shard '" +
                  shard + "', but '" + (dir / shard).string() + "' does not contain it");
}

bool WeightStore::has(const std::string& name) const {
  return owner_.count(name) != 0;
}

const TensorInfo& WeightStore::info(const std::string& name) const {
  const auto it = owner_.find(name);
  if (it == owner_.end()) throw Error("missing tensor " + name + " in " + dir_);
  return it->second->tensors().at(name);
}

Tensor WeightStore::get(const std::string& name) const {
  const auto it = owner_.find(name);
  if (it == owner_.end()) throw Error("missing tensor " + name + " in " + dir_);
  const Tensor host = it->second->get(name);
  if (device_ == Device::CPU) return host;
  const std::lock_guard<std::mutex> lock(uploads_mutex_);
  auto found = uploads_.find(name);
  if (found == uploads_.end()) {
    Uploaded up{DeviceMemory(device_, host.nbytes()), host};
    copy_bytes(up.memory.data(), device_, host.data, Device::CPU, host.nbytes());
    up.tensor.data = up.memory.data();
    up.tensor.device = device_;
    found = uploads_.emplace(name, std::move(up)).first;
  }
  return found->second.tensor;
}

bool WeightStore::place_together(const std::vector<std::string>& names) const {
  if (device_ == Device::CPU || names.size() < 2) return false;
  std::vector<Tensor> hosts;
  size_t bytes = 0;
  for (const std::string& name : names) {
    const auto it = owner_.find(name);
    if (it == owner_.end()) return false;
    hosts.push_back(it->second->get(name));
    if (hosts.back().dtype != hosts.front().dtype) return false;
    bytes += hosts.back().nbytes();
  }
  // Every tensor starts 256-byte aligned (the vector loads of the GPU kernels need 16).
  for (size_t i = 0; i + 1 < hosts.size(); ++i)
    if (hosts[i].nbytes() % 256 != 0) return false;
  const std::lock_guard<std::mutex> lock(uploads_mutex_);
  for (const std::string& name : names)
    if (uploads_.count(name) != 0) return false;
  // The first entry owns the allocation; the others are views into it (uploads_ is only ever
  // cleared as a whole).
  DeviceMemory memory(device_, bytes);
  std::byte* base = memory.data();
  size_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    Uploaded up{i == 0 ? std::move(memory) : DeviceMemory(), hosts[i]};
    copy_bytes(base + offset, device_, hosts[i].data, Device::CPU, hosts[i].nbytes());
    up.tensor.data = base + offset;
    up.tensor.device = device_;
    uploads_.emplace(names[i], std::move(up));
    offset += hosts[i].nbytes();
  }
  return true;
}

void WeightStore::set_device(Device device) {
  check_device_usable(device);
  const std::lock_guard<std::mutex> lock(uploads_mutex_);
  uploads_.clear();
  device_ = device;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(owner_.size());
  for (const auto& [name, file] : owner_) out.push_back(name);
  return out;
}

uint64_t WeightStore::total_bytes() const {
  uint64_t sum = 0;
  for (const auto& [name, file] : owner_) sum += file->tensors().at(name).nbytes();
  return sum;
}

uint64_t WeightStore::total_parameters() const {
  uint64_t sum = 0;
  for (const auto& [name, file] : owner_) sum += file->tensors().at(name).numel();
  return sum;
}

}  // namespace ringlm::io
