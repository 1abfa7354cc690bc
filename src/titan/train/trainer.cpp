#include "titan/train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "titan/components/data/dataloader.h"
#include "titan/components/manifest.h"
#include "titan/config/resolve.h"
#include "titan/distributed/activation_checkpoint.h"
#include "titan/errors.h"
#include "titan/platform/blas.h"
#include "titan/platform/logging.h"
#include "titan/platform/memory.h"

namespace titan::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void set_threads(int local_world_size) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  int threads = env ? std::atoi(env) : 0;
  if (threads <= 0) {
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                              std::max(1, local_world_size));
  }
  torch::set_num_threads(threads);
}

}  // namespace

void check_trainable(const config::JobConfig& job, const distributed::ParallelDims& dims) {
  if (dims.cp > 1 || dims.pp > 1 || dims.ep > 1) {
    throw ConfigError(fmt::format("this build trains with data and tensor parallelism only; got "
                                  "{} (context, pipeline and expert parallel degrees must be 1)",
                                  dims.describe()));
  }
  auto shape =
      get_train_spec(job.model.name).build_on_device(job.model.flavor, torch::kMeta)->shape();
  distributed::check_tensor_parallel(shape, dims.tp, job.training.seq_len,
                                     !job.parallelism.disable_sequence_parallel);
}

Trainer::Trainer(config::JobConfig job, distributed::WorldInfo world) : job_(std::move(job)) {
  platform::enable_memory_counting();
  set_threads(world.local_world_size);
  setup_parallelism(world);
  setup_model();
  setup_data();
  optimizer_ = std::make_unique<components::Adam>(
      params_, components::AdamOptions::from_config(job_.optimizer));
  scheduler_ = std::make_unique<components::LrScheduler>(job_.lr_scheduler, job_.optimizer.lr,
                                                         job_.training.steps);
  checkpoint_ = std::make_unique<components::checkpoint::CheckpointManager>(
      job_.checkpoint, job_.job.dump_folder, world_->global(),
      components::checkpoint::ModelIdentity{job_.model.name, job_.model.flavor});
  bool writes_metrics = world_->info().rank == 0;
  metrics_ = std::make_unique<components::MetricsLogger>(
      writes_metrics ? job_.job.dump_folder + "/metrics.jsonl" : "");
  peak_flops_ = platform::measure_gemm_flops(compute_dtype_);
  log_header();
  if (writes_metrics) write_manifest();
}

Trainer::~Trainer() = default;

void Trainer::setup_parallelism(const distributed::WorldInfo& world) {
  dims_ = distributed::ParallelDims::from_config(job_.parallelism, world.world_size);
  check_trainable(job_, dims_);
  distributed::CommTimeouts timeouts{std::chrono::seconds(job_.comm.init_timeout_seconds),
                                     std::chrono::seconds(job_.comm.train_timeout_seconds)};
  world_ = distributed::World::join(world, timeouts);
  using distributed::MeshDim;
  dp_group_ = mesh_group({MeshDim::DpReplicate, MeshDim::DpShard}, "dp");
  shard_group_ = mesh_group({MeshDim::DpShard, MeshDim::CP}, "dp_shard_cp");
  replicate_group_ = mesh_group({MeshDim::DpReplicate}, "dp_replicate");
  distributed::TensorParallelOptions tp;
  tp.sequence_parallel = !job_.parallelism.disable_sequence_parallel;
  tp.loss_parallel = !job_.parallelism.disable_loss_parallel;
  tp_ = std::make_unique<distributed::TensorParallel>(mesh_group({MeshDim::TP}, "tp"), tp);
  log::info("Parallel layout: {}; FSDP shards over {} rank(s), {} replica(s)", dims_.describe(),
            shard_group_->size(), replicate_group_->size());
  if (dims_.tp > 1) {
    log::info("Tensor parallel over {} ranks: sequence parallel {}, loss parallel {}", dims_.tp,
              tp.sequence_parallel ? "on" : "off", tp.loss_parallel ? "on" : "off");
  }
  bool multi_node = world.world_size > world.local_world_size;
  if (multi_node && job_.parallelism.data_parallel_shard_degree == -1 &&
      dims_.dp_shard > world.local_world_size) {
    log::warn("data_parallel_shard_degree = -1 resolved to {}, so FSDP shards across nodes and "
              "every all-gather crosses the network; set "
              "parallelism.data_parallel_replicate_degree = {} (HSDP: shard within a node, "
              "replicate across nodes)",
              dims_.dp_shard, dims_.dp_shard / world.local_world_size);
  }
}

std::shared_ptr<distributed::ProcessGroup> Trainer::mesh_group(
    const std::vector<distributed::MeshDim>& dims, const std::string& name) {
  // Every rank creates every group in the same order; each keeps the one it belongs to.
  std::shared_ptr<distributed::ProcessGroup> mine;
  for (int r = 0; r < dims_.world_size; ++r) {
    auto ranks = dims_.group_ranks(r, dims);
    if (ranks.front() != r) continue;
    auto group = world_->new_group(ranks, name);
    if (group) mine = group;
  }
  return mine;
}

void Trainer::setup_model() {
  spec_ = &get_train_spec(job_.model.name);
  model_ = spec_->build(job_.model.flavor);
  uint64_t seed = static_cast<uint64_t>(job_.training.seed.value_or(0));
  model_->init_weights(seed);
  flops_per_token_ = model_->flops_per_token(job_.training.seq_len);
  num_params_ = model_->num_params();  // before TP and FSDP leave each rank its slices
  // TorchTitan's parallelize order: tensor parallelism, activation checkpointing, FSDP.
  if (dims_.tp > 1) spec_->apply_tensor_parallel(*model_, *tp_);
  distributed::apply_activation_checkpointing(*model_, job_.activation_checkpoint);
  distributed::FsdpOptions fsdp;
  // As in TorchTitan, mixed precision applies when parameters are sharded.
  if (dims_.fsdp_enabled() && job_.training.mixed_precision_param == "bfloat16") {
    fsdp.param_dtype = torch::kBFloat16;
  }
  fsdp.reshard_after_forward = job_.parallelism.fsdp_reshard_after_forward != "never";
  fsdp_ = distributed::Fsdp::apply(*model_, shard_group_, replicate_group_, fsdp);
  params_ = fsdp_->parameters();
  compute_dtype_ = fsdp.param_dtype;
  log::info("Compute dtype {}, gradient reduction float32, activation checkpointing '{}'",
            compute_dtype_ == torch::kBFloat16 ? "bfloat16" : "float32",
            job_.activation_checkpoint.mode);
}

void Trainer::setup_data() {
  std::string tok_path = job_.model.tokenizer_path;
  if (tok_path.empty()) tok_path = job_.model.hf_assets_path;
  tokenizer_ = components::load_tokenizer(tok_path);
  if (tokenizer_->vocab_size() > model_->shape().vocab_size) {
    throw ConfigError(fmt::format("the tokenizer ({}) has {} ids but model {} {} has vocab_size "
                                  "{}; choose a matching model.flavor or model.tokenizer_path",
                                  tokenizer_->describe(), tokenizer_->vocab_size(),
                                  job_.model.name, job_.model.flavor,
                                  model_->shape().vocab_size));
  }
  auto options = components::data::data_loader_options(
      job_, dims_.dp_rank(world_->info().rank), dims_.dp(), world_->info().local_rank);
  data_ = std::make_unique<components::data::DataLoader>(options, *tokenizer_);
  local_tokens_per_step_ =
      data_->accumulation_steps() * job_.training.local_batch_size * job_.training.seq_len;
  global_tokens_per_step_ = local_tokens_per_step_ * dims_.dp();
}

void Trainer::log_header() {
  auto blas = platform::blas_info();
  if (!blas.optimized) {
    log::warn("BLAS is not an optimized one ({}, kernels '{}'): GEMMs will be slow; install "
              "libopenblas0-openmp",
              blas.library, blas.core);
  }
  log::info("Model {} {}: {} parameters, {} FLOPs per token at seq_len {}", job_.model.name,
            job_.model.flavor, components::with_commas(num_params_),
            components::with_commas(flops_per_token_), job_.training.seq_len);
  log::info("Peak FLOPS used for computing MFU: {:.3e} ({} GEMM measured at start on {} "
            "threads; BLAS kernels {})",
            peak_flops_, compute_dtype_ == torch::kBFloat16 ? "bf16" : "fp32",
            torch::get_num_threads(), blas.core.empty() ? "?" : blas.core);
  log::info("Tokenizer {}; {}", tokenizer_->describe(), data_->describe());
}

void Trainer::write_manifest() {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : data_->files()) {
    files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  }
  nlohmann::json manifest = {
      {"versions", components::environment_versions()},
      {"config_toml", config::to_toml(job_)},
      {"world", {{"world_size", dims_.world_size}, {"layout", dims_.describe()},
                 {"dp", dims_.dp()}, {"threads_per_rank", torch::get_num_threads()}}},
      {"model", {{"name", job_.model.name}, {"flavor", job_.model.flavor},
                 {"parameters", num_params_}, {"flops_per_token", flops_per_token_}}},
      {"data", {{"tokenizer", tokenizer_->describe()}, {"files", files},
                {"tokens_per_step", global_tokens_per_step_}}},
      {"peak_flops", peak_flops_},
  };
  components::write_manifest(job_.job.dump_folder + "/run_manifest.json", manifest);
}

double Trainer::grad_norm() {
  auto sq = torch::tensor({fsdp_->grad_sq_sum(tp_->norm_weights(params_))}, torch::kDouble);
  tp_->group().all_reduce_(sq, distributed::ReduceOp::Sum, "gradient norm all-reduce over TP");
  return std::sqrt(sq.item<double>());
}

double Trainer::clip_gradients() {
  torch::NoGradGuard no_grad;
  double norm = grad_norm();
  double max_norm = job_.training.max_norm;
  if (max_norm > 0 && norm > max_norm) {
    double scale = max_norm / (norm + 1e-6);
    for (auto& p : params_) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

Trainer::StepResult Trainer::train_step(int64_t step) {
  StepResult r;
  optimizer_->zero_grad();
  double local_loss = 0;
  for (int64_t m = 0; m < data_->accumulation_steps(); ++m) {
    auto data_start = Clock::now();
    auto batch = data_->get(step - 1, m);
    r.data_time_s += seconds_since(data_start);
    auto logits = model_->forward(batch.input);  // [B, S, V] (V / tp with loss parallelism)
    // Sum over this microbatch's tokens divided by the step's global token count, so that
    // summing gradients over microbatches and ranks gives the global mean's gradient.
    auto loss = tp_->loss_sum(logits, batch.label) / static_cast<double>(global_tokens_per_step_);
    loss.backward();
    local_loss += loss.item<double>();
  }
  tp_->reduce_partial_grads();
  r.grad_norm = clip_gradients();
  optimizer_->step(scheduler_->lr_at(step));
  auto loss_t = torch::tensor({local_loss}, torch::kDouble);
  dp_group_->all_reduce_(loss_t, distributed::ReduceOp::Sum, "loss all-reduce");
  r.loss = loss_t.item<double>();
  if (!std::isfinite(r.loss)) {
    throw Error(fmt::format("loss is {} at step {}; lower optimizer.lr or check the data",
                            r.loss, step));
  }
  return r;
}

void Trainer::log_state_memory() {
  auto bytes = [](const std::vector<torch::Tensor>& ts) {
    int64_t n = 0;
    for (const auto& t : ts) n += t.defined() ? t.numel() * t.element_size() : 0;
    return n;
  };
  std::vector<torch::Tensor> grads;
  for (const auto& p : params_) grads.push_back(p.grad());
  int64_t state = bytes(optimizer_->exp_avg()) + bytes(optimizer_->exp_avg_sq());
  constexpr double kMiB = 1 << 20;
  log::info("Per-rank training state: parameters {:.2f} MiB, gradients {:.2f} MiB, optimizer "
            "{:.2f} MiB; peak live tensors in the first step: {:.2f} MiB",
            bytes(params_) / kMiB, bytes(grads) / kMiB, state / kMiB,
            platform::peak_tensor_bytes() / kMiB);
}

components::checkpoint::ShardedStateDict Trainer::global_pieces(
    const std::vector<torch::Tensor>& tensors, const std::string& prefix, bool loading) {
  auto local = fsdp_->shard_view(tensors, prefix);
  return loading ? tp_->for_load(local, prefix) : tp_->to_global(local, prefix);
}

components::checkpoint::ShardedStateDict Trainer::model_state(bool loading) {
  return global_pieces(params_, "", loading);
}

components::checkpoint::ShardedStateDict Trainer::optimizer_state(bool loading) {
  auto state = global_pieces(optimizer_->exp_avg(), "optimizer.exp_avg.", loading);
  state.merge(global_pieces(optimizer_->exp_avg_sq(), "optimizer.exp_avg_sq.", loading));
  return state;
}

int64_t Trainer::resume() {
  torch::NoGradGuard no_grad;
  auto model = model_state(true);
  auto optimizer = optimizer_state(true);
  nlohmann::json state = {{"train_state", {{"step", 0}, {"optimizer_steps", 0}}}};
  auto loaded = checkpoint_->load(model, optimizer, state);
  tp_->finish_load();
  if (!loaded) return 1;
  if (loaded->model_only) {
    log::info("Loaded model weights from {}; training starts at step 1", loaded->path);
    return 1;
  }
  optimizer_->set_steps_taken(state["train_state"]["optimizer_steps"].get<int64_t>());
  log::info("Resumed from {} (step {})", loaded->path, loaded->step);
  return loaded->step + 1;
}

void Trainer::save_checkpoint(int64_t step) {
  // The data position, the schedule and the RNG streams are functions of the step in titan,
  // so the step is the whole train state beyond the tensors.
  nlohmann::json state = {
      {"train_state", {{"step", step},
                       {"tokens_seen", step * global_tokens_per_step_},
                       {"optimizer_steps", optimizer_->steps_taken()}}},
      {"lr_scheduler", {{"step", step}}},
      {"dataloader", {{"step", step}}}};
  checkpoint_->save(step, model_state(false), optimizer_state(false), state,
                    config::to_toml(job_), step == job_.training.steps);
}

void Trainer::train() {
  const auto& t = job_.training;
  if (job_.checkpoint.create_seed_checkpoint) {
    save_checkpoint(0);
    log::info("Wrote the seed checkpoint {}", checkpoint_->step_folder(0));
    return;
  }
  int64_t first = resume();
  log::info("Training starts at step {} of {}", first, t.steps);
  auto window_start = Clock::now();
  double window_data = 0;
  int64_t window_steps = 0;
  for (int64_t step = first; step <= t.steps; ++step) {
    if (step > 1 && data_->epoch(step - 1) > data_->epoch(step - 2)) {
      log::info("Dataset exhausted: step {} starts pass {} over the data from sample 0", step,
                data_->epoch(step - 1) + 1);
    }
    StepResult r = train_step(step);
    if (step == first) log_state_memory();
    if (checkpoint_->should_save(step, t.steps)) save_checkpoint(step);
    window_data += r.data_time_s;
    ++window_steps;
    bool log_now = step == first || step % job_.metrics.log_freq == 0 || step == t.steps;
    if (!log_now) continue;
    double elapsed = seconds_since(window_start);
    components::StepMetrics m;
    m.step = step;
    m.loss = r.loss;
    m.grad_norm = r.grad_norm;
    m.lr = scheduler_->lr_at(step);
    m.step_time_s = elapsed / static_cast<double>(window_steps);
    m.data_time_s = window_data / static_cast<double>(window_steps);
    // Tokens per second per device, as TorchTitan: ranks that split a batch's work (TP) share
    // its tokens.
    m.tps = static_cast<double>(local_tokens_per_step_) / m.step_time_s / dims_.tp;
    m.tflops = static_cast<double>(flops_per_token_) * m.tps / 1e12;
    m.mfu = 100.0 * static_cast<double>(flops_per_token_) * m.tps / peak_flops_;
    auto peak = static_cast<double>(platform::peak_tensor_bytes());
    m.memory_gib = peak / (1ull << 30);
    m.memory_pct = 100.0 * peak / static_cast<double>(platform::total_memory_bytes());
    platform::reset_peak_tensor_bytes();
    m.tokens_seen = step * global_tokens_per_step_;
    metrics_->record(m);
    window_start = Clock::now();
    window_data = 0;
    window_steps = 0;
  }
  checkpoint_->wait();
  dp_group_->barrier("end of training");
  log::info("Training completed");
}

}  // namespace titan::train
