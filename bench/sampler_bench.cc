// Host cost of sampling one row (engine/sampler.h sample_token: processors, distribution, pick,
// logprobs) at a vocabulary size, per sampling setting: what a serving step pays per row on the
// CPU after the model's logits reach the host (on a GPU, per step and row, beside the GPU's own
// step time). Single thread, best of --repeats passes of --rows rows over normal(0, 3) logits
// (and "peaked" rows: the same with 20 tokens raised by 12).
//   sampler_bench [--vocab 128256] [--rows 64] [--repeats 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace {

using ringlm::engine::SampleInput;
using ringlm::engine::SamplingParams;
using ringlm::engine::TokenHistory;

struct Setting {
  const char* name;
  SamplingParams params;
  bool peaked = false;  // rows whose 20 best tokens stand 12 above the rest, as an LLM's often do
};

std::vector<Setting> settings() {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams t;
  t.temperature = 0.8f;
  SamplingParams top_p = t;
  top_p.top_p = 0.9f;
  SamplingParams top_k = top_p;
  top_k.top_k = 50;
  SamplingParams logprobs = t;
  logprobs.want_logprobs = true;
  logprobs.logprobs = 5;
  SamplingParams penalties = top_p;
  penalties.repetition_penalty = 1.1f;
  penalties.frequency_penalty = 0.5f;
  return {{"greedy", greedy},
          {"temperature 0.8", t},
          {"temperature 0.8, top_p 0.9", top_p},
          {"temperature 0.8, top_p 0.9, top_k 50", top_k},
          {"temperature 0.8, logprobs 5", logprobs},
          {"top_p 0.9 + repetition/frequency penalties", penalties},
          {"temperature 0.8, top_p 0.9, peaked rows", top_p, true},
          {"temperature 0.8, peaked rows", t, true}};
}

}  // namespace

int main(int argc, char** argv) {
  int vocab = 128256, rows = 64, repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::stoi(argv[i + 1]);
    if (a == "--vocab") {
      vocab = v;
    } else if (a == "--rows") {
      rows = v;
    } else if (a == "--repeats") {
      repeats = v;
    } else {
      std::fprintf(stderr, "usage: sampler_bench [--vocab N] [--rows N] [--repeats N]\n");
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> logits(static_cast<size_t>(rows)), peaked;
  for (auto& row : logits) {
    row.resize(static_cast<size_t>(vocab));
    for (float& l : row) l = normal(rng);
  }
  std::vector<int32_t> prompt(200);
  for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
  TokenHistory history(prompt);
  for (int i = 0; i < 100; ++i)
    history.add_generated(static_cast<int32_t>(rng() % static_cast<unsigned>(vocab)));
  peaked = logits;
  for (auto& row : peaked) {
    for (int i = 0; i < 20; ++i) row[rng() % static_cast<unsigned>(vocab)] += 12.0f;
  }
  std::printf("vocab %d, %d rows, best of %d\n", vocab, rows, repeats);
  for (const Setting& s : settings()) {
    double best_ms = 1e30;
    int64_t checksum = 0;
    std::vector<float> scratch;
    for (int rep = 0; rep < repeats; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < rows; ++r) {
        scratch = (s.peaked ? peaked : logits)[static_cast<size_t>(r)];
        SampleInput input;
        input.params = &s.params;
        input.history = &history;
        input.seed = 42;
        input.index = static_cast<uint64_t>(r);
        checksum += ringlm::engine::sample_token(scratch, input).token;
      }
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      best_ms = std::min(best_ms, took.count());
    }
    std::printf("%-45s %8.3f ms per row  (token sum %lld)\n", s.name, best_ms / rows,
                static_cast<long long>(checksum));
  }
  return 0;
}
