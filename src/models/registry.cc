#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "models/gemma.h"
#include "models/llama.h"
#include "models/model.h"

namespace ringlm::models {

namespace {
using Factory =
    std::function<std::unique_ptr<Model>(io::ModelConfig, std::unique_ptr<io::WeightStore>)>;

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> families = {
      {"llama", make_llama}, {"mistral", make_llama}, {"qwen2", make_llama},
      {"qwen3", make_llama}, {"gemma2", make_gemma},  {"gemma3_text", make_gemma}};
  return families;
}
}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Model> load_model(const std::string& model_dir, Device device) {
  io::ModelConfig config = io::load_model_config(model_dir);
  const auto& families = registry();
  auto it = families.find(config.model_type);
  if (it == families.end()) {
    std::ostringstream supported;
    for (const auto& name : supported_model_types())
      supported << (supported.tellp() ? ", " : "") << name;
    RINGLM_USER_CHECK(false, model_dir, "/config.json: unsupported model_type '", config.model_type,
                      "' (supported: ", supported.str(), ")");
  }
  auto weights = std::make_unique<io::WeightStore>(model_dir);
  weights->set_device(device);
  auto model = it->second(std::move(config), std::move(weights));
  // The uploads ran on this thread's stream; a runner on another thread (the serving engine's
  // loop) must see them complete.
  synchronize_device(device);
  return model;
}

}  // namespace ringlm::models
