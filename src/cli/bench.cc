// `ringlm bench`: throughput of a model on random tokens (greedy), on CPU or GPU. Two modes:
// - prompts (default): B random prompts of --prompt-len tokens are prefilled and decoded --gen
//   tokens through the continuous-batching loop; reports prefill and decode tokens/s.
// - --context N: steady-state decode at a given context. Each of B rows starts with N tokens of
//   zero K/V (decode speed does not depend on the values, and prefilling 256 × 32k tokens would
//   dominate the run), then decodes --gen steps; reports tokens/s, ms/step, and the bytes each step
//   must read (weights + the K/V its rows see) for a roofline comparison.
// The numbers go to docs/benchmarks.md next to a same-run reference; unit tests never time
// anything.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/thread_pool.h"
#include "engine/runner.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#endif

namespace ringlm::cli {

namespace {

struct BenchShape {
  int64_t batch = 1;
  int64_t prompt_len = 128;  // prompts mode
  int64_t context = 0;       // > 0: synthetic-context decode mode
  int64_t gen = 128;
  int64_t repeat = 3;
  bool overlap = true;  // --context decode: step s + 1 launched before step s is collected
};

// K and V of every layer for one token, in the layers' formats (shared layers store nothing).
size_t kv_bytes_per_token(const kv::PagedKvCache& cache) {
  size_t bytes = 0;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) == g)
      bytes += cache.bytes_per_block(g) / static_cast<size_t>(cache.block_tokens());
  }
  return bytes;
}

// Keys a decode query at `context` tokens sees in a layer of group g (its window bounds it).
int64_t keys_seen(const kv::PagedKvCache& cache, int g, const BenchShape& shape) {
  const int64_t window = cache.group(g).window;
  return window > 0 ? std::min(shape.context + 1, window) : shape.context + 1;
}

// K/V bytes one decode step at `context` tokens per row reads, over all layers (a shared layer
// reads its donor's).
double kv_bytes_per_step(const kv::PagedKvCache& cache, const BenchShape& shape) {
  double bytes = 0;
  for (int g = 0; g < cache.num_groups(); ++g) {
    const int storage = cache.table_group(g);
    const double per_layer =
        static_cast<double>(cache.bytes_per_block(storage)) /
        static_cast<double>(cache.block_tokens() * cache.group(storage).layers.size());
    bytes += per_layer * static_cast<double>(cache.group(g).layers.size()) *
             static_cast<double>(keys_seen(cache, g, shape));
  }
  return bytes * static_cast<double>(shape.batch);
}

// FLOPs of one decode step (a token per row): 2 per weight of each projection — q, k, v, o, gate,
// up and down in every layer and the LM head, from the config's Llama-family dims — and 4 per
// head dim per key a query sees (Q·Kᵀ, then P·V), windows bounding the sliding layers' keys.
double flops_per_step(const io::ModelConfig& c, const kv::PagedKvCache& cache,
                      const BenchShape& shape) {
  const auto hidden = static_cast<double>(c.hidden_size);
  const auto q_width = static_cast<double>(c.num_attention_heads * c.head_dim);
  const auto kv_width = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const double per_layer =
      hidden * (2 * q_width + 2 * kv_width) + 3 * hidden * static_cast<double>(c.intermediate_size);
  const double weights = per_layer * static_cast<double>(c.num_hidden_layers) +
                         hidden * static_cast<double>(c.vocab_size);
  double keys = 0;  // over layers, per row
  for (int g = 0; g < cache.num_groups(); ++g)
    keys += static_cast<double>(cache.group(g).layers.size() * keys_seen(cache, g, shape));
  return static_cast<double>(shape.batch) * (2 * weights + 4 * q_width * keys);
}

// The roofline a step is held to: the longer of moving its bytes at the copy bandwidth and doing
// its FLOPs at the matmul peak (--peak-gb-s, --peak-tflop-s: the machine's measured figures).
struct Peaks {
  double bytes_per_s = 0, flop_per_s = 0;  // 0: not given
};

// K/V bytes the pools hold now (blocks in use, every storage group).
double kv_resident_bytes(const kv::PagedKvCache& cache) {
  double bytes = 0;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) == g)
      bytes +=
          static_cast<double>(cache.used_blocks(g)) * static_cast<double>(cache.bytes_per_block(g));
  }
  return bytes;
}

// K/V bytes of every storage group's pool (the --kv-memory budget, less the null blocks).
double kv_pool_bytes(const kv::PagedKvCache& cache) {
  double bytes = 0;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) == g)
      bytes += static_cast<double>(cache.num_blocks(g) - 1) *
               static_cast<double>(cache.bytes_per_block(g));
  }
  return bytes;
}

// How many rows like the current ones the pools could hold: each storage group's pool divided by
// its blocks per row, the tightest group deciding.
double max_rows(const kv::PagedKvCache& cache, int64_t rows) {
  double best = INFINITY;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) != g || cache.used_blocks(g) == 0) continue;
    const double per_row = static_cast<double>(cache.used_blocks(g)) / static_cast<double>(rows);
    best = std::min(best, std::floor(static_cast<double>(cache.num_blocks(g) - 1) / per_row));
  }
  return best;
}

struct DecodeResult {
  double tok_s = 0, step_ms = 0;
  // GPU: host time per step — the loop's planning between steps plus the runner's uploads and
  // launch (Runner::host_prep_seconds). With --no-overlap-steps the GPU waits for all of it;
  // overlapped, only for what outlasts the step before.
  double host_ms = 0;
  double resident_bytes = 0;  // K/V blocks the rows held at the end of a run
  double max_rows = 0;        // rows of this shape the pools could hold
};

// Synthetic-context decode: the best tokens/s over `repeat` runs of `gen` steps.
DecodeResult decode_at_context(engine::Runner& runner, const models::Model& model,
                               const BenchShape& shape) {
  DecodeResult result;
  auto& cache = runner.cache();
  cache.zero_storage();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size() - 1));
  for (int64_t r = 0; r <= shape.repeat; ++r) {  // run 0 warms up
    std::vector<kv::SequenceId> seqs;
    std::vector<int32_t> next;
    for (int64_t b = 0; b < shape.batch; ++b) {
      const kv::SequenceId seq = cache.add_sequence();
      RINGLM_USER_CHECK(cache.reserve(seq, shape.context + shape.gen + 1),
                        "--kv-memory is too small for ", shape.batch, " rows of ",
                        shape.context + shape.gen + 1, " tokens");
      // In steps of at most max_step_tokens, as a chunked prefill writes it: sliding groups keep
      // only their window (plus one step) at any time.
      const int64_t step_tokens = cache.config().max_step_tokens;
      for (int64_t done = 0; done < shape.context; done += step_tokens)
        RINGLM_CHECK(cache.append(seq, std::min(step_tokens, shape.context - done)),
                     "append of the synthetic context failed");
      seqs.push_back(seq);
      next.push_back(token(rng));
    }
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const double prep_before = runner.host_prep_seconds();
    double planning = 0;
    // As the engine runs decode: step s + 1 is planned and launched before step s is collected,
    // its tokens fed from step s's argmax on the device (shape.overlap; else one at a time).
    std::unique_ptr<kv::StepPlan> plans[2];
    const std::vector<char> no_host_rows(seqs.size(), 0);
    std::vector<engine::Runner::Feed> feeds;
    for (size_t b = 0; b < seqs.size(); ++b)
      feeds.push_back({static_cast<int32_t>(b), static_cast<int32_t>(b)});
    const auto collect_tokens = [&](kv::StepPlan* next_plan) {
      const engine::Runner::Selected out = runner.collect();
      if (out.argmax.empty()) {  // a CPU model: its logits
        Tensor ids(next.data(), DType::I32, {out.logits.size(0)});
        ops::argmax(out.logits, ids);
      } else {
        next = out.argmax;
      }
      if (next_plan == nullptr) return;
      for (size_t b = 0; b < seqs.size(); ++b)
        next_plan->set_token(static_cast<int64_t>(b), next[b]);
    };
    for (int64_t step = 0; step < shape.gen; ++step) {
      const auto plan_start = Clock::now();
      std::vector<kv::RowRequest> rows;
      for (size_t b = 0; b < seqs.size(); ++b) {
        RINGLM_CHECK(cache.append(seqs[b], 1), "decode append failed");
        rows.push_back({seqs[b], {next[b]}, shape.context + step, false, true});
      }
      auto& plan = plans[step % 2];
      plan = std::make_unique<kv::StepPlan>(rows, cache);
      planning += std::chrono::duration<double>(Clock::now() - plan_start).count();
      const bool fed = shape.overlap && step > 0;
      runner.launch(*plan, no_host_rows, {},
                    fed ? std::span<const engine::Runner::Feed>(feeds)
                        : std::span<const engine::Runner::Feed>());
      if (fed) {
        collect_tokens(plan.get());
      } else if (!shape.overlap) {
        collect_tokens(nullptr);
      }
    }
    if (shape.overlap) collect_tokens(nullptr);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double host_seconds = planning + runner.host_prep_seconds() - prep_before;
    result.resident_bytes = kv_resident_bytes(cache);
    result.max_rows = max_rows(cache, shape.batch);
    for (kv::SequenceId seq : seqs) cache.release(seq);
    if (r == 0) continue;
    const double tok_s = static_cast<double>(shape.batch * shape.gen) / seconds;
    if (tok_s > result.tok_s) {
      result.tok_s = tok_s;
      result.step_ms = seconds * 1e3 / static_cast<double>(shape.gen);
      result.host_ms = host_seconds * 1e3 / static_cast<double>(shape.gen);
    }
  }
  return result;
}

}  // namespace

namespace {

std::vector<int64_t> list_flag(const Args& args, const std::string& name, int64_t fallback) {
  if (!args.has(name)) return {fallback};
  const auto values = args.int_list(name);
  RINGLM_USER_CHECK(!values.empty(), "--", name, " needs at least one value");
  return {values.begin(), values.end()};
}

nlohmann::json bench_one(engine::Runner& runner, models::Model& model, const BenchShape& shape,
                         const Peaks& peaks) {
  nlohmann::json out = {{"batch", shape.batch}, {"gen", shape.gen}};
  if (shape.context > 0) {
    const DecodeResult decode = decode_at_context(runner, model, shape);
    const double kv_bytes = kv_bytes_per_step(runner.cache(), shape);
    const double moved = kv_bytes + static_cast<double>(model.weights().total_bytes());
    out["context"] = shape.context;
    out["decode_tok_s"] = decode.tok_s;
    out["step_ms"] = decode.step_ms;
    if (model.device() != Device::CPU) out["host_ms"] = decode.host_ms;
    out["kv_bytes_per_step"] = kv_bytes;
    out["bytes_per_step"] = moved;
    out["achieved_gb_s"] = moved / (decode.step_ms * 1e-3) / 1e9;
    const double flops = flops_per_step(model.config(), runner.cache(), shape);
    out["flops_per_step"] = flops;
    out["achieved_tflop_s"] = flops / (decode.step_ms * 1e-3) / 1e12;
    if (peaks.bytes_per_s > 0 && peaks.flop_per_s > 0) {
      const double roofline_s = std::max(moved / peaks.bytes_per_s, flops / peaks.flop_per_s);
      out["roofline_step_ms"] = roofline_s * 1e3;
      out["of_roofline"] = roofline_s / (decode.step_ms * 1e-3);
    }
    // Memory: what the rows held (sliding groups keep only their window's blocks) next to an
    // all-full-attention cache of the same format, and how many such rows the pools could hold.
    const double tokens = static_cast<double>(shape.batch * (shape.context + shape.gen));
    out["kv_resident_bytes"] = decode.resident_bytes;
    out["kv_full_attention_bytes"] =
        tokens * static_cast<double>(kv_bytes_per_token(runner.cache()));
    out["kv_pool_bytes"] = kv_pool_bytes(runner.cache());
    out["max_rows_at_kv_memory"] = decode.max_rows;
    return out;
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.vocab_size() - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(shape.batch));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(shape.prompt_len));
    for (auto& t : p) t = token(rng);
  }
  engine::GreedyOptions options;
  options.max_new_tokens = shape.gen;
  options.max_rows = static_cast<int>(shape.batch);
  // One warm-up run (page in the weights), then the best of `repeat` timed runs.
  engine::generate_greedy(runner, prompts, options);
  double best_prefill = 0, best_decode = 0;
  for (int64_t r = 0; r < shape.repeat; ++r) {
    const auto result = engine::generate_greedy(runner, prompts, options);
    const double prefill = static_cast<double>(result.prompt_tokens) / result.prefill_seconds;
    // The first generated token of each row comes from its prefill step.
    const double decode =
        static_cast<double>(result.generated_tokens - shape.batch) / result.decode_seconds;
    best_prefill = std::max(best_prefill, prefill);
    best_decode = std::max(best_decode, decode);
  }
  out["prompt_len"] = shape.prompt_len;
  out["prefill_tok_s"] = best_prefill;
  out["decode_tok_s"] = best_decode;
  return out;
}

// ", 88.7 % of roofline" when the peaks were given.
std::string roofline_note(const nlohmann::json& out) {
  if (!out.contains("of_roofline")) return "";
  char note[48];
  std::snprintf(note, sizeof(note), ", %.1f %% of roofline",
                100 * out["of_roofline"].get<double>());
  return note;
}

}  // namespace

int run_bench(int argc, char** argv) {
  Args args(argc, argv,
            {"model",           "prompt-len",   "context",          "gen",
             "batch",           "threads",      "kv-memory",        "gpu-memory-utilization",
             "max-step-tokens", "kv-format",    "kv-config",        "kv-quant-start",
             "max-kv-size",     "kv-keep",      "repeat",           "json",
             "device",          "decode-parts", "no-overlap-steps", "peak-gb-s",
             "peak-tflop-s"},
            {"json", "no-overlap-steps"});
  apply_threads(args);
  const Device device = device_flag(args);
  if (args.has("decode-parts")) {
    // How many parts CUDA decode attention splits a row's keys into at most (a tuning knob).
    RINGLM_USER_CHECK(device == Device::CUDA, "--decode-parts needs --device cuda");
#ifdef RINGLM_HAS_CUDA
    cuda::set_decode_part_limit(static_cast<int>(args.integer("decode-parts", 128)));
#endif
  }
  auto model = models::load_model(args.required("model"), device);
  Peaks peaks;
  peaks.bytes_per_s = args.number("peak-gb-s", 0) * 1e9;
  peaks.flop_per_s = args.number("peak-tflop-s", 0) * 1e12;
  RINGLM_USER_CHECK(peaks.bytes_per_s >= 0 && peaks.flop_per_s >= 0,
                    "--peak-gb-s and --peak-tflop-s must not be negative");
  BenchShape base;
  base.gen = args.integer("gen", base.gen);
  base.repeat = args.integer("repeat", base.repeat);
  base.overlap = overlap_steps(args);
  const auto batches = list_flag(args, "batch", 1);
  const auto contexts = list_flag(args, "context", 0);
  const auto prompt_lens = list_flag(args, "prompt-len", base.prompt_len);
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  RINGLM_USER_CHECK(*std::min_element(prompt_lens.begin(), prompt_lens.end()) >= 1 &&
                        base.gen >= 1 && base.repeat >= 1 &&
                        *std::min_element(batches.begin(), batches.end()) >= 1 &&
                        *std::min_element(contexts.begin(), contexts.end()) >= 0,
                    "--prompt-len, --gen, --batch and --repeat must be positive, --context >= 0");
  engine::RunnerConfig config = runner_config(args);
  config.max_sequences = static_cast<int>(std::max<int64_t>(max_batch, config.max_sequences));
  config.max_step_tokens = std::max(config.max_step_tokens, max_batch);
  engine::Runner runner(*model, config);
  std::vector<BenchShape> shapes;
  for (int64_t context : contexts) {
    for (int64_t prompt_len : context > 0 ? std::vector<int64_t>{0} : prompt_lens) {
      for (int64_t batch : batches) {
        BenchShape shape = base;
        shape.batch = batch;
        shape.context = context;
        shape.prompt_len = prompt_len;
        shapes.push_back(shape);
      }
    }
  }
  for (const BenchShape& shape : shapes) {
    {
      const int64_t batch = shape.batch, context = shape.context;
      nlohmann::json out = bench_one(runner, *model, shape, peaks);
      out["model"] = args.required("model");
      out["model_type"] = model->config().model_type;
      out["device"] = device_name(device);
#ifdef RINGLM_HAS_CUDA
      if (device == Device::CUDA && cuda::decode_part_limit() > 0)
        out["decode_part_limit"] = cuda::decode_part_limit();
#endif
      out["threads"] = ThreadPool::global().num_threads();
      std::string formats;
      for (int g = 0; g < runner.cache().num_groups(); ++g) {
        const std::string name = runner.cache().group(g).format.name();
        if (formats.find(name) == std::string::npos) formats += (formats.empty() ? "" : ",") + name;
      }
      out["kv_format"] = formats;
      out["kv_bytes_per_token"] = kv_bytes_per_token(runner.cache());
      out["weight_bytes"] = model->weights().total_bytes();
      out["graph_replays"] = runner.graph_replays();
      if (args.has("json")) {
        std::printf("%s\n", out.dump().c_str());
      } else if (context > 0) {
        std::printf(
            "%s %s batch=%lld context=%lld: decode %.2f tok/s, %.3f ms/step, %.1f GB/s, %.1f "
            "TFLOP/s%s; KV held %.1f MiB (all-full-attention %.1f MiB), %.0f such rows fit\n",
            model->config().model_type.c_str(), device_name(device), static_cast<long long>(batch),
            static_cast<long long>(context), out["decode_tok_s"].get<double>(),
            out["step_ms"].get<double>(), out["achieved_gb_s"].get<double>(),
            out["achieved_tflop_s"].get<double>(), roofline_note(out).c_str(),
            out["kv_resident_bytes"].get<double>() / 1048576.0,
            out["kv_full_attention_bytes"].get<double>() / 1048576.0,
            out["max_rows_at_kv_memory"].get<double>());
      } else {
        std::printf(
            "%s %s threads=%d batch=%lld prompt=%lld gen=%lld: prefill %.1f tok/s, decode %.2f "
            "tok/s\n",
            model->config().model_type.c_str(), device_name(device),
            ThreadPool::global().num_threads(), static_cast<long long>(batch),
            static_cast<long long>(shape.prompt_len), static_cast<long long>(base.gen),
            out["prefill_tok_s"].get<double>(), out["decode_tok_s"].get<double>());
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace ringlm::cli
