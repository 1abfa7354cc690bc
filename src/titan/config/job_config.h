// The typed job config: TorchTitan's sections and keys (v0.2.2 names) with its defaults.
// The schema (config/schema.h) binds every field to its "section.key" name and help text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace titan::config {

struct JobSection {
  std::string config_file;
  std::string dump_folder = "./outputs";
  std::string description = "default job";
  bool print_config = false;
};

struct ModelSection {
  std::string name = "llama3";
  std::string flavor = "debugmodel";
  std::string tokenizer_path;
  std::string hf_assets_path;
};

struct OptimizerSection {
  std::string name = "AdamW";
  double lr = 8e-4;
  double eps = 1e-8;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double weight_decay = 0.1;
  std::string implementation = "fused";
};

struct LrSchedulerSection {
  int64_t warmup_steps = 200;
  std::optional<double> decay_ratio;
  std::string decay_type = "linear";
  double min_lr_factor = 0.0;
};

struct TrainingSection {
  std::string dataset = "kjv_bible";
  std::string dataset_path;
  int64_t local_batch_size = 8;
  int64_t global_batch_size = -1;
  int64_t seq_len = 2048;
  int64_t steps = 10000;
  double max_norm = 1.0;
  std::optional<int64_t> seed;
  bool deterministic = false;
  std::string mixed_precision_param = "bfloat16";
  std::string mixed_precision_reduce = "float32";
  bool skip_bad_documents = false;
  std::string on_nonfinite = "stop";  // titan's: "stop" or "skip" a step with a NaN/inf loss
};

struct ParallelismSection {
  int64_t data_parallel_replicate_degree = 1;
  int64_t data_parallel_shard_degree = -1;
  std::string fsdp_reshard_after_forward = "default";
  int64_t tensor_parallel_degree = 1;
  bool disable_loss_parallel = false;
  bool disable_sequence_parallel = false;  // titan's: sequence parallelism is on with TP
  int64_t context_parallel_degree = 1;
  std::string context_parallel_rotate_method = "allgather";  // or "alltoall" (the ring)
  std::string context_parallel_load_balancer = "headtail";   // or "none"
  int64_t pipeline_parallel_degree = 1;
  std::string pipeline_parallel_schedule = "1F1B";
  int64_t pipeline_parallel_microbatch_size = 1;
  std::optional<int64_t> pipeline_parallel_layers_per_stage;
  int64_t pipeline_parallel_first_stage_less_layers = 1;
  int64_t pipeline_parallel_last_stage_less_layers = 1;
  std::vector<std::vector<std::string>> module_fqns_per_model_part;  // empty: the even split
  int64_t expert_parallel_degree = 1;
  int64_t expert_tensor_parallel_degree = 1;  // TorchTitan's ETP: 1 (experts whole) or tp
};

struct CheckpointSection {
  bool enable = false;
  std::string folder = "checkpoint";
  int64_t interval = 500;
  double interval_seconds = 0;  // titan's: also save once this much time passed; 0: off
  int64_t keep_latest_k = 10;
  std::string async_mode = "disabled";
  int64_t load_step = -1;
  std::string initial_load_path;
  bool initial_load_model_only = true;
  bool initial_load_in_hf = false;
  bool last_save_model_only = true;
  bool last_save_in_hf = false;
  std::string export_dtype = "float32";
  std::vector<std::string> exclude_from_loading;
  bool create_seed_checkpoint = false;
};

struct ActivationCheckpointSection {
  std::string mode = "selective";
  std::string selective_ac_option = "2";
};

struct CompileSection {
  bool enable = false;
  std::vector<std::string> components = {"model", "loss"};
};

struct MetricsSection {
  int64_t log_freq = 10;
  bool enable_tensorboard = false;
  std::string save_tb_folder = "tb";
};

struct ProfilingSection {
  bool enable_profiling = false;
  int64_t profile_freq = 10;
  int64_t profiler_warmup = 3;
  int64_t profiler_active = 1;
  bool enable_memory_snapshot = false;
  std::string save_traces_folder = "profile_traces";
  std::string save_memory_snapshot_folder = "memory_snapshot";
};

struct ValidationSection {
  bool enable = false;
  std::string dataset = "kjv_bible";
  std::string dataset_path;
  int64_t local_batch_size = 8;
  int64_t seq_len = 2048;
  int64_t freq = 500;
  int64_t steps = -1;
};

struct CommSection {
  int64_t init_timeout_seconds = 300;
  int64_t train_timeout_seconds = 100;
  int64_t trace_buf_size = 20000;  // the flight recorder's records per rank; 0: off
  std::string save_traces_folder = "comm_traces";
};

/// The whole job config. Built by config::resolve(); defaults are TorchTitan's except where a
/// comment in schema.cpp says why (e.g. the default dataset ships with Debian).
struct JobConfig {
  JobSection job;
  ModelSection model;
  OptimizerSection optimizer;
  LrSchedulerSection lr_scheduler;
  TrainingSection training;
  ParallelismSection parallelism;
  CheckpointSection checkpoint;
  ActivationCheckpointSection activation_checkpoint;
  CompileSection compile;
  MetricsSection metrics;
  ProfilingSection profiling;
  ValidationSection validation;
  CommSection comm;
};

}  // namespace titan::config
