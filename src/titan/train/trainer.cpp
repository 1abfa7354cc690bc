#include "titan/train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <thread>
#include <tuple>

#include "titan/components/data/dataloader.h"
#include "titan/components/data/dataset.h"
#include "titan/components/manifest.h"
#include "titan/components/validate.h"
#include "titan/distributed/flight_recorder.h"
#include "titan/distributed/compile.h"
#include "titan/distributed/context_parallel.h"
#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/models/common/transformer_block.h"
#include "titan/platform/blas.h"
#include "titan/platform/device.h"
#include "titan/platform/env.h"
#include "titan/platform/logging.h"
#include "titan/platform/memory.h"
#include "titan/platform/clock.h"

namespace titan::train {
namespace {

using platform::Clock;
using platform::seconds_since;

// The job's flavor cut as `split` says, by its family's splitter.
distributed::SplitFn splitter(const config::JobConfig& job) {
  const auto* spec = &protocols::get_train_spec(job.model.name);
  return [spec, flavor = job.model.flavor](const models::PipelineSplit& split) {
    return spec->pipeline_split(flavor, split);
  };
}

// Expert parallelism's degrees against the model: experts divisible, MoE layers present, and
// the tensor-parallel ranks it borrows routing different tokens.
void check_expert_parallel(const config::ParallelismSection& p,
                           const distributed::ParallelDims& dims, models::CausalLM& model) {
  const int64_t etp = p.expert_tensor_parallel_degree;
  if (etp != 1 && etp != dims.tp) {
    throw ConfigError(fmt::format("parallelism.expert_tensor_parallel_degree = {} must be 1 or "
                                  "tensor_parallel_degree ({})",
                                  etp, dims.tp));
  }
  if (etp > 1) {
    throw ConfigError(fmt::format("parallelism.expert_tensor_parallel_degree = {} (experts split "
                                  "by tensor parallelism under expert parallelism) is not built "
                                  "in titan yet; set it to 1",
                                  etp));
  }
  if (!dims.ep_enabled()) return;
  int64_t moe_layers = 0;
  for (const auto& block : model.blocks()) {
    auto* moe = block.module->feed_forward->as<models::MoEImpl>();
    if (!moe) continue;
    ++moe_layers;
    if (moe->args.num_experts % dims.ep != 0) {
      throw ConfigError(fmt::format("parallelism.expert_parallel_degree = {} must divide the "
                                    "model's {} routed experts per layer",
                                    dims.ep, moe->args.num_experts));
    }
  }
  if (moe_layers == 0) {
    throw ConfigError(fmt::format("parallelism.expert_parallel_degree = {}: the model has no "
                                  "mixture-of-experts layer to split; set it to 1",
                                  dims.ep));
  }
  if (dims.tp_enabled() && p.disable_sequence_parallel) {
    throw ConfigError("parallelism.expert_parallel_degree > 1 with tensor_parallel_degree > 1 "
                      "borrows the tensor-parallel ranks, which must route different tokens: "
                      "unset parallelism.disable_sequence_parallel");
  }
}

}  // namespace

void check_trainable(const config::JobConfig& job, const distributed::ParallelDims& dims) {
  components::data::resolve_dataset(job.training.dataset, job.training.dataset_path);
  distributed::check_context_parallel(job.parallelism, dims.cp, job.training.seq_len);
  if (job.validation.enable) {
    components::check_validation(job, dims);
    distributed::check_context_parallel(job.parallelism, dims.cp, job.validation.seq_len,
                                        "validation.seq_len");
  }
  distributed::check_compile(job.compile);
  tools::check_profiling(job.profiling);
  const auto& spec = protocols::get_train_spec(job.model.name);
  if (job.checkpoint.enable && job.checkpoint.last_save_in_hf) {
    try {
      spec.hf_config(job.model.flavor);
    } catch (const CheckpointError& e) {
      throw ConfigError(fmt::format("checkpoint.last_save_in_hf = true: {} {} has no Hugging Face "
                                    "form ({}); unset it and convert a checkpoint later if needed",
                                    job.model.name, job.model.flavor, e.what()));
    }
  }
  auto model = spec.build_on_device(job.model.flavor, torch::kMeta);
  check_expert_parallel(job.parallelism, dims, *model);
  distributed::check_tensor_parallel(*model, dims.tp, job.training.seq_len,
                                     !job.parallelism.disable_sequence_parallel);
  if (job.validation.enable) {
    distributed::check_tensor_parallel(*model, dims.tp, job.validation.seq_len,
                                       !job.parallelism.disable_sequence_parallel,
                                       "validation.seq_len");
  }
  const auto pieces = distributed::all_pieces(job, dims, splitter(job));
  for (const auto& piece : pieces) {
    try {
      spec.build_part(job.model.flavor, torch::kMeta, piece);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("model.flavor = {} with parallelism.pipeline_parallel_degree = "
                                    "{} ({} model parts): {}",
                                    job.model.flavor, dims.pp, pieces.size(), e.what()));
    }
  }
}

int metrics_rank(const config::JobConfig& job, const distributed::ParallelDims& dims) {
  return distributed::metrics_rank(job, dims, splitter(job));
}

namespace {

// <dump_folder>/<save_tb_folder>/<YYYYmmdd-HHMM> at the start, in local time, as TorchTitan.
std::string tensorboard_folder(const config::JobConfig& job) {
  return job.job.dump_folder + "/" + job.metrics.save_tb_folder + "/" +
         platform::local_time_stamp("%Y%m%d-%H%M");
}

// Test hook (tests/integration/nonfinite_step_test.cpp): TITAN_TEST_NAN_AT="<rank>:<step>"
// makes that rank's first gradient NaN after the step's backward.
void poison_gradients_if_asked(int rank, int64_t step, const std::vector<torch::Tensor>& params) {
  if (!platform::test_hook_at("TITAN_TEST_NAN_AT", rank, step)) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    log::warn("TITAN_TEST_NAN_AT: rank {} makes a gradient NaN in step {}", rank, step);
    p.mutable_grad().fill_(std::numeric_limits<float>::quiet_NaN());
    return;
  }
}

}  // namespace

Trainer::Trainer(config::JobConfig job, distributed::WorldInfo world)
    : job_(std::move(job)),
      threads_(platform::configured_threads(world.local_world_size), world.local_world_size,
               /*adapt=*/!job_.training.deterministic) {
  platform::enable_memory_counting();
  // As TorchTitan's training.deterministic: an op without a deterministic kernel is an error.
  if (job_.training.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
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
  bool writes_metrics = world_->info().rank == metrics_rank(job_, dims_);
  metrics_ = std::make_unique<components::MetricsLogger>(
      writes_metrics ? job_.job.dump_folder + "/metrics.jsonl" : "",
      writes_metrics && job_.metrics.enable_tensorboard ? tensorboard_folder(job_) : "");
  profiler_ = std::make_unique<tools::Profiler>(
      job_.profiling, job_.job.dump_folder + "/" + job_.profiling.save_traces_folder,
      world_->info().rank, device_.is_cuda());
  memory_snapshot_ = std::make_unique<tools::MemorySnapshot>(
      job_.profiling, job_.job.dump_folder + "/" + job_.profiling.save_memory_snapshot_folder,
      world_->info().rank, device_);
  if (device_.is_cpu()) {
    cpu_peak_ = std::make_unique<platform::CpuPeak>(compute_dtype_);
    peak_flops_ = cpu_peak_->per_thread() * threads_.threads();
  } else {
    peak_flops_ = platform::accelerator_peak_flops(platform::device_name(device_), compute_dtype_);
  }
  log_header();
  if (writes_metrics) write_manifest();
}

Trainer::~Trainer() = default;

void Trainer::setup_parallelism(const distributed::WorldInfo& world) {
  dims_ = distributed::ParallelDims::from_config(job_.parallelism, world.world_size);
  check_trainable(job_, dims_);
  distributed::CommTimeouts timeouts{std::chrono::seconds(job_.comm.init_timeout_seconds),
                                     std::chrono::seconds(job_.comm.train_timeout_seconds)};
  device_ = platform::select_rank_device(world.local_rank);
  auto recorder = std::make_shared<distributed::FlightRecorder>(
      world.rank, job_.comm.trace_buf_size,
      std::filesystem::path(job_.job.dump_folder) / job_.comm.save_traces_folder);
  distributed::dump_comm_traces_on_signal(recorder);
  world_ = distributed::World::join(world, timeouts, device_, recorder);
  mesh_ = distributed::DeviceMesh::build(dims_, *world_);
  dims_.log_layout(job_.parallelism, world.local_world_size);
}

void Trainer::setup_model() {
  spec_ = &protocols::get_train_spec(job_.model.name);
  auto whole = spec_->build_on_device(job_.model.flavor, torch::kMeta);
  shape_ = whole->shape();
  flops_per_token_ = whole->flops_per_token(job_.training.seq_len);
  num_params_ = whole->num_params();
  num_active_params_ = whole->num_active_params();
  forward_backward_ =
      distributed::make_forward_backward(job_, dims_, mesh_, *world_, splitter(job_));
  uint64_t seed = static_cast<uint64_t>(job_.training.seed.value_or(0));
  std::vector<distributed::ModelPart*> parts;
  for (const auto& piece : forward_backward_->local_pieces()) {
    model_parts_.push_back(std::make_unique<distributed::ModelPart>(
        spec_->build_part(job_.model.flavor, torch::kMeta, piece), mesh_));
    auto& part = *model_parts_.back();
    spec_->parallelize(part, dims_, mesh_, job_);
    follow_free_cores(part.model());
    part.init_weights(device_, seed);
    auto params = part.parameters();
    params_.insert(params_.end(), params.begin(), params.end());
    parts.push_back(&part);
  }
  forward_backward_->attach(parts);
  load_balancer_ = std::make_unique<components::ExpertLoadBalancer>(local_models(), mesh_);
  compute_dtype_ = model_parts_.front()->compute_dtype();
  log::info("Compute dtype {}, gradient reduction float32, activation checkpointing '{}'",
            compute_dtype_ == torch::kBFloat16 ? "bfloat16" : "float32",
            job_.activation_checkpoint.mode);
  int64_t param_bytes = 0;
  for (const auto& p : params_) {
    param_bytes += p.numel() * p.element_size();
    platform::retag_memory(p, platform::MemoryCategory::Parameters);
  }
  constexpr double kGiB = 1 << 30;
  log::info("Model setup (built on meta, parallelized, this rank's pieces initialised): peak "
            "live tensors {:.3f} GiB, peak RSS {:.3f} GiB; this rank's parameters {:.3f} GiB",
            platform::peak_tensor_bytes() / kGiB, platform::peak_rss_bytes() / kGiB,
            param_bytes / kGiB);
  platform::reset_peak_tensor_bytes();
}

std::vector<models::CausalLM*> Trainer::local_models() const {
  std::vector<models::CausalLM*> out;
  for (const auto& part : model_parts_) out.push_back(&part->model());
  return out;
}

void Trainer::follow_free_cores(models::CausalLM& model) {
  model.add_block_wrapper([this](int64_t, const torch::Tensor& x,
                                 const models::CausalLM::TensorFn& inner) {
    threads_.apply();
    auto out = inner(x);
    if (out.requires_grad()) {
      out.register_hook([this](const torch::Tensor& grad) {
        threads_.apply();  // the block's backward starts
        return grad;
      });
    }
    return out;
  });
}

void Trainer::setup_data() {
  std::string tok_path = job_.model.tokenizer_path;
  if (tok_path.empty()) tok_path = job_.model.hf_assets_path;
  tokenizer_ = components::load_tokenizer(tok_path);
  if (tokenizer_->vocab_size() > shape_.vocab_size) {
    throw ConfigError(fmt::format("the tokenizer ({}) has {} ids but model {} {} has vocab_size "
                                  "{}; choose a matching model.flavor or model.tokenizer_path",
                                  tokenizer_->describe(), tokenizer_->vocab_size(),
                                  job_.model.name, job_.model.flavor, shape_.vocab_size));
  }
  auto options = components::data::data_loader_options(
      job_, dims_.dp_rank(world_->info().rank), dims_.dp(), world_->info().local_rank);
  data_ = std::make_unique<components::data::DataLoader>(options, *tokenizer_);
  local_tokens_per_step_ =
      data_->accumulation_steps() * job_.training.local_batch_size * job_.training.seq_len;
  global_tokens_per_step_ = local_tokens_per_step_ * dims_.dp();
  if (job_.validation.enable) {
    validator_ = std::make_unique<components::Validator>(
        job_, dims_, dims_.dp_rank(world_->info().rank), world_->info().local_rank, *tokenizer_,
        mesh_[distributed::MeshGroup::Loss]);
  }
}

void Trainer::log_header() {
  auto blas = platform::blas_info();
  if (!blas.optimized) {
    log::warn("LibTorch was built without an optimized BLAS ({}): CPU GEMMs will be slow; use "
              "the PyTorch wheel scripts/setup.sh installs",
              blas.library);
  }
  const std::string active =
      num_active_params_ == num_params_
          ? std::string()
          : fmt::format(" ({} active per token)", components::with_commas(num_active_params_));
  log::info("Model {} {}: {} parameters{}, {} FLOPs per token at seq_len {}", job_.model.name,
            job_.model.flavor, components::with_commas(num_params_), active,
            components::with_commas(flops_per_token_), job_.training.seq_len);
  log::info("Computing {}", config::describe_compute(
                                job_, compute_dtype_ == torch::kBFloat16 ? "bfloat16" : "float32"));
  const char* dtype = compute_dtype_ == torch::kBFloat16 ? "bf16" : "fp32";
  const std::string device = platform::device_name(device_);
  log::info("Device {} ({}) with {:.2f}GiB memory", device_.str(), device,
            platform::device_capacity_bytes(device_) / double(1 << 30));
  if (!peak_flops_) {
    log::warn("Peak FLOPS of {} in {} is not in titan's table of accelerators: MFU is "
              "reported as n/a",
              device, dtype);
  } else if (cpu_peak_) {
    log::info("Peak FLOPS used for computing MFU: {:.3e} per thread x the threads a step runs "
              "with ({} now: {:.3e}; the faster of fp32 and {} GEMM measured on one thread at "
              "start; {}, {} kernels)",
              cpu_peak_->per_thread(), threads_.threads(), *peak_flops_, dtype, blas.library,
              blas.kernels);
  } else {
    log::info("Peak FLOPS used for computing MFU: {:.3e} ({} dense peak of {})", *peak_flops_,
              dtype, device);
  }
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
                 {"dp", dims_.dp()}, {"threads_per_rank", threads_.max_threads()},
                 {"threads_follow_free_cores", threads_.adapts()}}},
      {"model", {{"name", job_.model.name}, {"flavor", job_.model.flavor},
                 {"parameters", num_params_}, {"flops_per_token", flops_per_token_}}},
      {"data", {{"tokenizer", tokenizer_->describe()}, {"files", files},
                {"tokens_per_step", global_tokens_per_step_}}},
      {"device", {{"type", device_.str()}, {"name", platform::device_name(device_)},
                  {"memory_bytes", platform::device_capacity_bytes(device_)}}},
      {"peak_flops", peak_flops_ ? nlohmann::json(*peak_flops_) : nlohmann::json()},
      {"peak_flops_per_thread",
       cpu_peak_ ? nlohmann::json(cpu_peak_->per_thread()) : nlohmann::json()},
      {"restart_count", platform::env_int("TORCHELASTIC_RESTART_COUNT", 0)},
  };
  components::write_manifest(job_.job.dump_folder + "/run_manifest.json", manifest);
}

double Trainer::grad_norm() {
  torch::NoGradGuard no_grad;
  double sq = 0;
  for (auto& part : model_parts_) sq += part->grad_sq_sum();
  return std::sqrt(forward_backward_->sum_over_stages(sq));
}

double Trainer::clip_scale(double norm) const {
  const double max_norm = job_.training.max_norm;
  return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

void Trainer::snapshot_on_allocation_failure(int64_t step, const std::function<void()>& work) {
  try {
    work();
  } catch (const c10::OutOfMemoryError& e) {
    memory_snapshot_->allocation_failed(step, e.what_without_backtrace());
    throw;
  }
}

Trainer::StepResult Trainer::train_step(int64_t step) {
  StepResult r;
  optimizer_->zero_grad();
  double local_loss = 0;
  for (int64_t m = 0; m < data_->accumulation_steps(); ++m) {
    auto data_start = Clock::now();
    torch::Tensor input, label;
    {
      RECORD_USER_SCOPE("data loading");
      auto batch = data_->get(consumed_samples_, m);
      input = batch.input.to(device_);  // [B, S]
      label = batch.label.to(device_);  // [B, S]
    }
    r.data_time_s += seconds_since(data_start);
    // Each token's loss divided by the step's global token count, so that summing gradients
    // over microbatches, accumulation steps and ranks gives the global mean's gradient.
    // Backward's allocations outside the model's pieces count as activation gradients.
    platform::MemoryScope backward(platform::MemoryCategory::ActivationGradients);
    local_loss +=
        forward_backward_->run(input, label, static_cast<double>(global_tokens_per_step_));
  }
  consumed_samples_ += data_->layout().global_batch_size();
  for (auto& part : model_parts_) part->finish_backward();
  poison_gradients_if_asked(world_->info().rank, step, params_);
  r.grad_norm = grad_norm();
  std::tie(r.loss, r.max_loss) = global_losses(local_loss);
  // Both are global: every rank takes the same branch.
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    skip_nonfinite_step(step, r);
    return r;
  }
  load_balancer_->step();
  {
    RECORD_USER_SCOPE("optimizer");
    platform::MemoryScope optimizer(platform::MemoryCategory::OptimizerState);
    optimizer_->step(scheduler_->lr_at(step), clip_scale(r.grad_norm));
  }
  if (memory_snapshot_->enabled()) {
    auto state = optimizer_->exp_avg();
    const auto& second = optimizer_->exp_avg_sq();
    state.insert(state.end(), second.begin(), second.end());
    memory_snapshot_->classify(params_, state);
  }
  return r;
}

std::pair<double, double> Trainer::global_losses(double local_loss) {
  auto& loss_group = *mesh_[distributed::MeshGroup::Loss];
  auto loss_t = torch::tensor({local_loss}, torch::kDouble);
  auto max_t = loss_t.clone();
  loss_group.all_reduce_(loss_t, distributed::ReduceOp::Sum, "loss all-reduce");
  // Each of the loss group's ranks holds the same number of tokens: its own mean loss is its
  // share of the global mean times the group's size (TorchTitan's global_max_loss).
  loss_group.all_reduce_(max_t, distributed::ReduceOp::Max, "max loss all-reduce");
  return {forward_backward_->sum_over_stages(loss_t.item<double>()),
          forward_backward_->sum_over_stages(max_t.item<double>() * loss_group.size())};
}

void Trainer::skip_nonfinite_step(int64_t step, const StepResult& r) {
  if (job_.training.on_nonfinite != "skip") {
    throw DivergedError(fmt::format(
        "step {}: loss {}, grad_norm {}; stopped before its update, so no weight or checkpoint "
        "holds it (training.on_nonfinite = stop; 'skip' skips such steps): lower optimizer.lr or "
        "check the data",
        step, r.loss, r.grad_norm));
  }
  // As if the step had not run, but for its batch: no update, no expert-bias update, the
  // gradients dropped.
  load_balancer_->discard();
  optimizer_->zero_grad();
  ++skipped_steps_;
  log::warn("step {}: loss {}, grad_norm {}: skipped its update (training.on_nonfinite = "
            "skip; {} skipped so far)",
            step, r.loss, r.grad_norm, skipped_steps_);
}

void Trainer::record_memory(components::StepMetrics& m) {
  constexpr double kGiB = 1 << 30;
  const auto peaks = platform::memory_peaks(device_);
  m.max_active_gib = static_cast<double>(peaks.max_active) / kGiB;
  m.max_reserved_gib = static_cast<double>(peaks.max_reserved) / kGiB;
  m.num_alloc_retries = peaks.alloc_retries;
  m.num_ooms = peaks.ooms;
  m.num_system_allocs = peaks.system_allocs;
  const double capacity_gib =
      static_cast<double>(platform::device_capacity_bytes(device_)) / kGiB;
  m.max_active_pct = 100.0 * m.max_active_gib / capacity_gib;
  m.max_reserved_pct = 100.0 * m.max_reserved_gib / capacity_gib;
  m.memory_gib = device_.is_cpu() ? m.max_active_gib : m.max_reserved_gib;
  m.memory_pct = device_.is_cpu() ? m.max_active_pct : m.max_reserved_pct;
  platform::reset_memory_peaks(device_);
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

distributed::ShardedStateDict Trainer::global_pieces(const std::vector<torch::Tensor>& tensors,
                                                     const std::string& prefix, bool loading) {
  distributed::ShardedStateDict out;
  size_t offset = 0;
  for (auto& part : model_parts_) {
    const size_t n = part->parameters().size();
    std::vector<torch::Tensor> mine(tensors.begin() + offset, tensors.begin() + offset + n);
    out.merge(part->state(mine, prefix, loading));
    offset += n;
  }
  return out;
}

distributed::ShardedStateDict Trainer::model_state(bool loading) {
  auto state = global_pieces(params_, "", loading);
  state.merge(load_balancer_->state(loading));
  return state;
}

distributed::ShardedStateDict Trainer::optimizer_state(bool loading) {
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
  for (auto& part : model_parts_) part->finish_load();
  load_balancer_->finish_load();
  if (!loaded) return 1;
  if (loaded->model_only) {
    log::info("Loaded model weights from {}; training starts at step 1", loaded->path);
    return 1;
  }
  optimizer_->set_steps_taken(state["train_state"]["optimizer_steps"].get<int64_t>());
  skipped_steps_ = state["train_state"].value("skipped_steps", int64_t{0});
  consumed_samples_ = restore_data_position(state, loaded->path);
  log::info("Resumed from {} (step {}; {} samples consumed, the data continues at sample {} "
            "with global batch {})",
            loaded->path, loaded->step, consumed_samples_, consumed_samples_,
            data_->layout().global_batch_size());
  return loaded->step + 1;
}

int64_t Trainer::restore_data_position(const nlohmann::json& state,
                                       const std::string& path) const {
  const int64_t seq_len = job_.training.seq_len;
  // checkpoint.exclude_from_loading = dataloader: the data starts over, as in TorchTitan.
  if (!state.contains("dataloader")) return 0;
  const auto& data = state["dataloader"];
  if (data.contains("consumed_samples")) {
    const int64_t saved_seq_len = data.value("seq_len", seq_len);
    if (saved_seq_len != seq_len) {
      throw ConfigError(fmt::format(
          "{} consumed {} samples of training.seq_len {}, but this run has training.seq_len {}: "
          "the data position cannot continue exactly; resume with training.seq_len {}",
          path, data["consumed_samples"].get<int64_t>(), saved_seq_len, seq_len, saved_seq_len));
    }
    if (!data.contains("window_stride")) {
      log::warn("{} was saved by a titan whose samples overlapped by one token; this run cuts "
                "TorchTitan's disjoint windows of training.seq_len + 1 tokens, so sample {} "
                "starts {} tokens later in the data than it did there",
                path, data["consumed_samples"].get<int64_t>(),
                data["consumed_samples"].get<int64_t>());
    }
    return data["consumed_samples"].get<int64_t>();
  }
  const int64_t tokens = state["train_state"].value("tokens_seen", int64_t{0});
  if (tokens % seq_len != 0) {
    throw ConfigError(fmt::format("{} saw {} tokens, not a whole number of samples of "
                                  "training.seq_len {}: resume with the seq_len it trained with",
                                  path, tokens, seq_len));
  }
  return tokens / seq_len;
}

void Trainer::save_checkpoint(int64_t step, bool last) {
  RECORD_USER_SCOPE("checkpoint save");
  // The schedule and the RNG streams are functions of the step in titan, the data position
  // of the samples consumed: with the tensors, that is the whole train state.
  const int64_t seq_len = job_.training.seq_len;
  nlohmann::json state = {
      {"train_state", {{"step", step},
                       {"tokens_seen", consumed_samples_ * seq_len},
                       {"optimizer_steps", optimizer_->steps_taken()},
                       {"skipped_steps", skipped_steps_}}},
      {"lr_scheduler", {{"step", step}}},
      {"dataloader",
       {{"consumed_samples", consumed_samples_}, {"seq_len", seq_len},
        {"window_stride", seq_len + 1}}}};
  const bool model_only = last && job_.checkpoint.last_save_model_only;
  auto optimizer = model_only ? distributed::ShardedStateDict{} : optimizer_state(false);
  checkpoint_->save(step, model_state(false), optimizer, state, config::to_toml(job_), last);
}

namespace {

// Test hook (tests/integration/flight_recorder_test.cpp): TITAN_TEST_STALL_AT="<rank>:<step>"
// stops that rank before the step for good, so its peers wait in the step's first collective.
void stall_if_asked(int rank, int64_t step) {
  if (!platform::test_hook_at("TITAN_TEST_STALL_AT", rank, step)) return;
  log::warn("TITAN_TEST_STALL_AT: rank {} stops before step {}", rank, step);
  std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

void Trainer::train() {
  const auto& t = job_.training;
  if (job_.checkpoint.create_seed_checkpoint) {
    save_checkpoint(0, /*last=*/true);
    log::info("Wrote the seed checkpoint {}", checkpoint_->step_folder(0));
    return;
  }
  int64_t first = resume();
  const int restart = platform::env_int("TORCHELASTIC_RESTART_COUNT", 0);
  if (first > t.steps) {
    log::info("Nothing to train: the run resumed after step {}, and training.steps is {} (raise "
              "it to train further)",
              first - 1, t.steps);
  } else {
    log::info("Training starts at step {} of {}{}", first, t.steps,
              restart > 0 ? fmt::format(" (the launcher's restart {})", restart) : "");
  }
  auto window_start = Clock::now();
  double window_data = 0, window_all_to_all = 0, window_fsdp_wait = 0;
  int64_t window_steps = 0;
  for (int64_t step = first; step <= t.steps; ++step) {
    const int64_t epoch = data_->epoch(consumed_samples_);
    stall_if_asked(world_->info().rank, step);
    platform::kill_if_asked(world_->info().rank, step);
    profiler_->step_begin(step);
    memory_snapshot_->step_begin(step);
    StepResult r;
    snapshot_on_allocation_failure(step, [&] {
      r = train_step(step);
      if (step == first) log_state_memory();
      if (checkpoint_->should_save(step, t.steps)) {
        save_checkpoint(step, step == t.steps);
        platform::release_cached_memory();  // the save's buffers: no training step reuses them
      }
    });
    profiler_->step_end(step);
    memory_snapshot_->step_end(step);
    if (data_->epoch(consumed_samples_) > epoch) {
      log::info("Dataset exhausted in step {}: the data starts pass {} from sample 0", step,
                data_->epoch(consumed_samples_) + 1);
    }
    window_data += r.data_time_s;
    for (auto& part : model_parts_) {
      window_all_to_all += part->take_all_to_all_seconds();
      window_fsdp_wait += part->take_fsdp_wait_seconds();
    }
    ++window_steps;
    std::optional<components::ValidationResult> validation;
    if (validator_ && validator_->should_validate(step)) {
      validation = validator_->validate(*forward_backward_, local_models(), device_);
      platform::release_cached_memory();
      // The step's times and waits are the training's.
      window_start += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(validation->seconds));
      for (auto& part : model_parts_) {
        part->take_all_to_all_seconds();
        part->take_fsdp_wait_seconds();
      }
    }
    bool log_now = step == first || step % job_.metrics.log_freq == 0 || step == t.steps ||
                   validation.has_value();
    if (!log_now) continue;
    double elapsed = seconds_since(window_start);
    components::StepMetrics m;
    m.step = step;
    m.loss = r.loss;
    m.max_loss = r.max_loss;
    m.grad_norm = r.grad_norm;
    m.skipped_steps = skipped_steps_;
    m.lr = scheduler_->lr_at(step);
    m.step_time_s = elapsed / static_cast<double>(window_steps);
    m.total_steps = t.steps;
    m.eta_s = m.step_time_s * static_cast<double>(t.steps - step);
    m.data_time_s = window_data / static_cast<double>(window_steps);
    // Tokens per second per device, as TorchTitan: ranks that split a batch's work (TP, CP,
    // PP) share its tokens.
    m.tps = static_cast<double>(local_tokens_per_step_) / m.step_time_s /
            dims_.non_data_parallel_size();
    m.tflops = static_cast<double>(flops_per_token_) * m.tps / 1e12;
    m.cpu_threads = threads_.threads();
    if (cpu_peak_) peak_flops_ = cpu_peak_->peak(m.cpu_threads, m.tflops * 1e12);
    if (peak_flops_) m.mfu = 100.0 * m.tflops * 1e12 / *peak_flops_;
    record_memory(m);
    m.tokens_seen = consumed_samples_ * t.seq_len;
    m.consumed_samples = consumed_samples_;
    m.expert_loads = load_balancer_->loads();
    if (dims_.ep_enabled()) m.all_to_all_s = window_all_to_all / static_cast<double>(window_steps);
    if (dims_.fsdp_enabled() || dims_.dp_replicate_enabled()) {
      m.fsdp_wait_s = window_fsdp_wait / static_cast<double>(window_steps);
    }
    if (validation) {
      m.validation_loss = validation->loss;
      m.validation_tps = validation->tps;
    }
    metrics_->record(m);
    window_start = Clock::now();
    window_data = 0;
    window_all_to_all = 0;
    window_fsdp_wait = 0;
    window_steps = 0;
  }
  checkpoint_->wait();
  if (auto line = forward_backward_->summary(); !line.empty()) log::info("{}", line);
  world_->global()->barrier("end of training");
  log::info("Training completed");
}

}  // namespace titan::train
