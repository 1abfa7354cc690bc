#include "titan/config/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "titan/config/schedule_kind.h"
#include "titan/errors.h"
#include "titan/protocols/train_spec.h"

namespace titan::config {
namespace {

template <class T>
struct TypeOf;
template <>
struct TypeOf<bool> {
  static constexpr FieldType value = FieldType::Bool;
};
template <>
struct TypeOf<int64_t> {
  static constexpr FieldType value = FieldType::Int;
};
template <>
struct TypeOf<std::optional<int64_t>> {
  static constexpr FieldType value = FieldType::OptionalInt;
};
template <>
struct TypeOf<double> {
  static constexpr FieldType value = FieldType::Float;
};
template <>
struct TypeOf<std::optional<double>> {
  static constexpr FieldType value = FieldType::OptionalFloat;
};
template <>
struct TypeOf<std::string> {
  static constexpr FieldType value = FieldType::String;
};
template <>
struct TypeOf<std::vector<std::string>> {
  static constexpr FieldType value = FieldType::StringList;
};

template <>
struct TypeOf<std::vector<std::vector<std::string>>> {
  static constexpr FieldType value = FieldType::StringLists;
};

template <class T>
Value to_value(const T& v) {
  return Value(v);
}
template <class T>
Value to_value(const std::optional<T>& v) {
  return v ? Value(*v) : Value(std::monostate{});
}
template <class T>
void from_value(const Value& v, T& out) {
  out = std::get<T>(v);
}
template <class T>
void from_value(const Value& v, std::optional<T>& out) {
  if (std::holds_alternative<std::monostate>(v)) {
    out.reset();
  } else {
    out = std::get<T>(v);
  }
}

struct Options {
  std::vector<std::string> choices = {};
  std::optional<double> min = std::nullopt;
  bool ignore_case = false;
};

template <class Sec, class T>
FieldSpec field(const char* section, const char* key, Sec JobConfig::*sec, T Sec::*member,
                const char* help, Options options = {}) {
  FieldSpec f;
  f.section = section;
  f.key = key;
  f.type = TypeOf<T>::value;
  f.help = help;
  f.choices = std::move(options.choices);
  f.min = options.min;
  f.ignore_case = options.ignore_case;
  f.get = [sec, member](const JobConfig& c) { return to_value(c.*sec.*member); };
  f.set = [sec, member](JobConfig& c, const Value& v) { from_value(v, c.*sec.*member); };
  return f;
}

using C = JobConfig;

std::vector<FieldSpec> build_schema() {
  return {
      // job
      field("job", "config_file", &C::job, &JobSection::config_file,
            "TOML file applied over the named config (CLI still wins)"),
      field("job", "dump_folder", &C::job, &JobSection::dump_folder,
            "Folder for logs, metrics, checkpoints, traces and the run manifest"),
      field("job", "description", &C::job, &JobSection::description,
            "Free-text description recorded in the run manifest"),
      field("job", "print_config", &C::job, &JobSection::print_config,
            "Print the resolved config at start"),
      // model
      field("model", "name", &C::model, &ModelSection::name,
            "Model family (a registered train spec)", {protocols::train_spec_names()}),
      field("model", "flavor", &C::model, &ModelSection::flavor,
            "Model size within the family (e.g. debugmodel, 8B)"),
      field("model", "tokenizer_path", &C::model, &ModelSection::tokenizer_path,
            "tokenizer.json, tiktoken .model or a folder holding one; empty = built-in byte "
            "tokenizer"),
      field("model", "hf_assets_path", &C::model, &ModelSection::hf_assets_path,
            "Hugging Face folder (config.json, tokenizer, *.safetensors); its tokenizer is used "
            "when tokenizer_path is empty"),
      // optimizer
      field("optimizer", "name", &C::optimizer, &OptimizerSection::name, "Optimizer",
            {{"AdamW", "Adam"}}),
      field("optimizer", "lr", &C::optimizer, &OptimizerSection::lr, "Peak learning rate",
            {{}, 0.0}),
      field("optimizer", "eps", &C::optimizer, &OptimizerSection::eps,
            "Adam epsilon added to the denominator", {{}, 0.0}),
      field("optimizer", "beta1", &C::optimizer, &OptimizerSection::beta1,
            "Adam first-moment decay", {{}, 0.0}),
      field("optimizer", "beta2", &C::optimizer, &OptimizerSection::beta2,
            "Adam second-moment decay", {{}, 0.0}),
      field("optimizer", "weight_decay", &C::optimizer, &OptimizerSection::weight_decay,
            "Decoupled weight decay (AdamW)", {{}, 0.0}),
      field("optimizer", "implementation", &C::optimizer, &OptimizerSection::implementation,
            "fused (PyTorch's fused kernel: one pass per parameter) or for-loop (one op at a "
            "time)",
            {{"fused", "for-loop"}}),
      // lr_scheduler
      field("lr_scheduler", "warmup_steps", &C::lr_scheduler, &LrSchedulerSection::warmup_steps,
            "Steps of linear warmup from near zero to optimizer.lr", {{}, 0.0}),
      field("lr_scheduler", "decay_ratio", &C::lr_scheduler, &LrSchedulerSection::decay_ratio,
            "Fraction of steps spent decaying at the end (warmup-stable-decay); none = decay "
            "over all steps after warmup",
            {{}, 0.0}),
      field("lr_scheduler", "decay_type", &C::lr_scheduler, &LrSchedulerSection::decay_type,
            "Shape of the decay", {{"linear", "sqrt", "cosine"}}),
      field("lr_scheduler", "min_lr_factor", &C::lr_scheduler, &LrSchedulerSection::min_lr_factor,
            "Final learning rate as a fraction of lr", {{}, 0.0}),
      // training
      field("training", "dataset", &C::training, &TrainingSection::dataset,
            "Dataset name (kjv_bible: the King James Bible from Debian's bible-kjv-text)"),
      field("training", "dataset_path", &C::training, &TrainingSection::dataset_path,
            "JSON Lines file with a 'text' field, or a text file or folder; overrides "
            "training.dataset"),
      field("training", "local_batch_size", &C::training, &TrainingSection::local_batch_size,
            "Sequences per data-parallel rank per microbatch", {{}, 1.0}),
      field("training", "global_batch_size", &C::training, &TrainingSection::global_batch_size,
            "Sequences per optimizer step over all data-parallel ranks; -1 = local_batch_size x "
            "data-parallel degree (no gradient accumulation)",
            {{}, -1.0}),
      field("training", "seq_len", &C::training, &TrainingSection::seq_len, "Tokens per sequence",
            {{}, 1.0}),
      field("training", "steps", &C::training, &TrainingSection::steps, "Optimizer steps to train",
            {{}, 1.0}),
      field("training", "max_norm", &C::training, &TrainingSection::max_norm,
            "Clip gradients to this global L2 norm; 0 disables clipping", {{}, 0.0}),
      field("training", "seed", &C::training, &TrainingSection::seed,
            "Seed for initialisation and sampling; none = 0"),
      field("training", "deterministic", &C::training, &TrainingSection::deterministic,
            "Use deterministic algorithms only"),
      field("training", "mixed_precision_param", &C::training,
            &TrainingSection::mixed_precision_param,
            "dtype of gathered parameters and compute under FSDP", {{"bfloat16", "float32"}}),
      field("training", "mixed_precision_reduce", &C::training,
            &TrainingSection::mixed_precision_reduce, "dtype of gradient reduction", {{"float32"}}),
      field("training", "skip_bad_documents", &C::training, &TrainingSection::skip_bad_documents,
            "Skip (and count) documents that are not valid JSON / UTF-8 instead of failing"),
      field("training", "on_nonfinite", &C::training, &TrainingSection::on_nonfinite,
            "A step whose loss or gradient norm is NaN/inf: stop the run naming it, or skip "
            "its update (weights and optimizer state unchanged, its batch consumed)",
            {{"stop", "skip"}}),
      // parallelism
      field("parallelism", "data_parallel_replicate_degree", &C::parallelism,
            &ParallelismSection::data_parallel_replicate_degree,
            "Replicas for HSDP/DDP (gradients all-reduced across them)", {{}, 1.0}),
      field("parallelism", "data_parallel_shard_degree", &C::parallelism,
            &ParallelismSection::data_parallel_shard_degree,
            "FSDP shard degree; -1 = all ranks left over by the other dimensions", {{}, -1.0}),
      field("parallelism", "fsdp_reshard_after_forward", &C::parallelism,
            &ParallelismSection::fsdp_reshard_after_forward,
            "Free gathered parameters after forward", {{"default", "always", "never"}}),
      field("parallelism", "tensor_parallel_degree", &C::parallelism,
            &ParallelismSection::tensor_parallel_degree, "Tensor-parallel degree", {{}, 1.0}),
      field("parallelism", "disable_loss_parallel", &C::parallelism,
            &ParallelismSection::disable_loss_parallel,
            "Gather logits instead of a vocab-parallel loss under TP"),
      field("parallelism", "disable_sequence_parallel", &C::parallelism,
            &ParallelismSection::disable_sequence_parallel,
            "Keep the residual stream whole on every TP rank instead of sharding its sequence"),
      field("parallelism", "context_parallel_degree", &C::parallelism,
            &ParallelismSection::context_parallel_degree,
            "Context-parallel degree: ranks sharing each sequence", {{}, 1.0}),
      field("parallelism", "context_parallel_rotate_method", &C::parallelism,
            &ParallelismSection::context_parallel_rotate_method,
            "How context-parallel attention reaches the other ranks' keys: allgather (all at "
            "once) or alltoall (around the ring, overlapped with compute)",
            {{"allgather", "alltoall"}}),
      field("parallelism", "context_parallel_load_balancer", &C::parallelism,
            &ParallelismSection::context_parallel_load_balancer,
            "Sequence chunks per context-parallel rank: headtail (chunks i and 2cp-1-i, even "
            "causal work) or none (one contiguous chunk)",
            {{"headtail", "none"}}),
      field("parallelism", "pipeline_parallel_degree", &C::parallelism,
            &ParallelismSection::pipeline_parallel_degree, "Pipeline stages", {{}, 1.0}),
      field("parallelism", "pipeline_parallel_schedule", &C::parallelism,
            &ParallelismSection::pipeline_parallel_schedule, "Pipeline schedule (any case)",
            {schedule_names(), std::nullopt, true}),
      field("parallelism", "pipeline_parallel_microbatch_size", &C::parallelism,
            &ParallelismSection::pipeline_parallel_microbatch_size,
            "Sequences per pipeline microbatch (local_batch_size must divide by it)", {{}, 1.0}),
      field("parallelism", "pipeline_parallel_layers_per_stage", &C::parallelism,
            &ParallelismSection::pipeline_parallel_layers_per_stage,
            "Layers per pipeline stage (the embedding and the output counted as below); none = "
            "1 stage per rank for GPipe/1F1B, 2 for Interleaved1F1B/ZBVZeroBubble",
            {{}, 1.0}),
      field("parallelism", "pipeline_parallel_first_stage_less_layers", &C::parallelism,
            &ParallelismSection::pipeline_parallel_first_stage_less_layers,
            "Layers the embedding counts as when splitting the pipeline", {{}, 0.0}),
      field("parallelism", "pipeline_parallel_last_stage_less_layers", &C::parallelism,
            &ParallelismSection::pipeline_parallel_last_stage_less_layers,
            "Layers the final norm and output count as when splitting the pipeline", {{}, 0.0}),
      field("parallelism", "module_fqns_per_model_part", &C::parallelism,
            &ParallelismSection::module_fqns_per_model_part,
            "The modules of each pipeline stage, in stage order (tok_embeddings, layers.N, "
            "norm, output), instead of the even split; empty = the even split"),
      field("parallelism", "expert_parallel_degree", &C::parallelism,
            &ParallelismSection::expert_parallel_degree,
            "Expert-parallel degree (MoE): ranks borrowed from data_parallel_shard x "
            "context_parallel x tensor_parallel, each holding 1/ep of the routed experts",
            {{}, 1.0}),
      field("parallelism", "expert_tensor_parallel_degree", &C::parallelism,
            &ParallelismSection::expert_tensor_parallel_degree,
            "Tensor-parallel degree of the routed experts under expert parallelism: 1 (each "
            "expert whole on its rank) or tensor_parallel_degree",
            {{}, 1.0}),
      // checkpoint
      field("checkpoint", "enable", &C::checkpoint, &CheckpointSection::enable,
            "Save checkpoints and resume from the latest one"),
      field("checkpoint", "folder", &C::checkpoint, &CheckpointSection::folder,
            "Checkpoint folder inside job.dump_folder"),
      field("checkpoint", "interval", &C::checkpoint, &CheckpointSection::interval,
            "Steps between checkpoints", {{}, 1.0}),
      field("checkpoint", "interval_seconds", &C::checkpoint, &CheckpointSection::interval_seconds,
            "Also save at the first step ending this many seconds after the last save started "
            "(rank 0's clock, so every rank saves the same step); 0: steps only",
            {{}, 0.0}),
      field("checkpoint", "keep_latest_k", &C::checkpoint, &CheckpointSection::keep_latest_k,
            "Checkpoints kept; 0 keeps all", {{}, 0.0}),
      field("checkpoint", "async_mode", &C::checkpoint, &CheckpointSection::async_mode,
            "Write checkpoints in the background", {{"disabled", "async"}}),
      field("checkpoint", "load_step", &C::checkpoint, &CheckpointSection::load_step,
            "Step to resume from; -1 = latest", {{}, -1.0}),
      field("checkpoint", "initial_load_path", &C::checkpoint,
            &CheckpointSection::initial_load_path,
            "Checkpoint to start from when the checkpoint folder is empty"),
      field("checkpoint", "initial_load_model_only", &C::checkpoint,
            &CheckpointSection::initial_load_model_only,
            "Load only model weights from initial_load_path"),
      field("checkpoint", "initial_load_in_hf", &C::checkpoint,
            &CheckpointSection::initial_load_in_hf,
            "initial_load_path is a Hugging Face safetensors folder"),
      field("checkpoint", "last_save_model_only", &C::checkpoint,
            &CheckpointSection::last_save_model_only, "The final checkpoint holds weights only"),
      field("checkpoint", "last_save_in_hf", &C::checkpoint, &CheckpointSection::last_save_in_hf,
            "Write the final checkpoint as Hugging Face safetensors"),
      field("checkpoint", "export_dtype", &C::checkpoint, &CheckpointSection::export_dtype,
            "dtype of model-only exports", {{"float32", "bfloat16", "float16"}}),
      field("checkpoint", "exclude_from_loading", &C::checkpoint,
            &CheckpointSection::exclude_from_loading,
            "Parts not loaded on resume (model, optimizer, lr_scheduler, dataloader, "
            "train_state)"),
      field("checkpoint", "create_seed_checkpoint", &C::checkpoint,
            &CheckpointSection::create_seed_checkpoint,
            "Write the initial weights as step-0 and exit"),
      // activation_checkpoint
      field("activation_checkpoint", "mode", &C::activation_checkpoint,
            &ActivationCheckpointSection::mode, "Activation checkpointing",
            {{"none", "full", "selective"}}),
      field("activation_checkpoint", "selective_ac_option", &C::activation_checkpoint,
            &ActivationCheckpointSection::selective_ac_option,
            "'op' (recompute cheap ops) or N (checkpoint every N-th block)"),
      // compile
      field("compile", "enable", &C::compile, &CompileSection::enable,
            "Fused kernels and planned buffers"),
      field("compile", "components", &C::compile, &CompileSection::components, "Parts to compile",
            {{"model", "loss"}}),
      // metrics
      field("metrics", "log_freq", &C::metrics, &MetricsSection::log_freq,
            "Steps between step lines and metrics.jsonl records", {{}, 1.0}),
      field("metrics", "enable_tensorboard", &C::metrics, &MetricsSection::enable_tensorboard,
            "Write TensorBoard event files"),
      field("metrics", "save_tb_folder", &C::metrics, &MetricsSection::save_tb_folder,
            "TensorBoard folder inside job.dump_folder"),
      // profiling
      field("profiling", "enable_profiling", &C::profiling, &ProfilingSection::enable_profiling,
            "Write each rank's Kineto (Chrome) trace every profile_freq steps"),
      field("profiling", "profile_freq", &C::profiling, &ProfilingSection::profile_freq,
            "Steps between traces", {{}, 1.0}),
      field("profiling", "profiler_warmup", &C::profiling, &ProfilingSection::profiler_warmup,
            "Steps the profiler warms up before it records", {{}, 0.0}),
      field("profiling", "profiler_active", &C::profiling, &ProfilingSection::profiler_active,
            "Steps each trace records (the last of each profile_freq)", {{}, 1.0}),
      field("profiling", "enable_memory_snapshot", &C::profiling,
            &ProfilingSection::enable_memory_snapshot,
            "Write each rank's memory snapshot every profile_freq steps and on running out"),
      field("profiling", "save_traces_folder", &C::profiling, &ProfilingSection::save_traces_folder,
            "Trace folder inside job.dump_folder"),
      field("profiling", "save_memory_snapshot_folder", &C::profiling,
            &ProfilingSection::save_memory_snapshot_folder,
            "Memory snapshot folder inside job.dump_folder"),
      // validation
      field("validation", "enable", &C::validation, &ValidationSection::enable,
            "Compute validation loss"),
      field("validation", "dataset", &C::validation, &ValidationSection::dataset,
            "Validation dataset name"),
      field("validation", "dataset_path", &C::validation, &ValidationSection::dataset_path,
            "Validation dataset file or folder"),
      field("validation", "local_batch_size", &C::validation, &ValidationSection::local_batch_size,
            "Validation samples per rank and batch", {{}, 1.0}),
      field("validation", "seq_len", &C::validation, &ValidationSection::seq_len,
            "Tokens per validation sample", {{}, 1.0}),
      field("validation", "freq", &C::validation, &ValidationSection::freq,
            "Steps between validations", {{}, 1.0}),
      field("validation", "steps", &C::validation, &ValidationSection::steps,
            "Validation batches; -1 = the whole dataset", {{}, -1.0}),
      // comm
      field("comm", "init_timeout_seconds", &C::comm, &CommSection::init_timeout_seconds,
            "Bound on rendezvous and the first collective (s)", {{}, 1.0}),
      field("comm", "trace_buf_size", &C::comm, &CommSection::trace_buf_size,
            "Collectives each rank's flight recorder keeps (0 = off)", {{}, 0.0}),
      field("comm", "save_traces_folder", &C::comm, &CommSection::save_traces_folder,
            "Flight recorder folder inside job.dump_folder"),
      field("comm", "train_timeout_seconds", &C::comm, &CommSection::train_timeout_seconds,
            "Bound on every collective during training (s)", {{}, 1.0}),
  };
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

[[noreturn]] void bad_type(const FieldSpec& f, const std::string& text) {
  throw ConfigError(fmt::format("--{}: expected {}, got '{}'", f.name(), type_name(f.type), text));
}

// A number too large (or, for a float, too small) for its type: said so, not "expected a number".
[[noreturn]] void out_of_range(const FieldSpec& f, const std::string& text, const char* range) {
  throw ConfigError(fmt::format("--{}: {} is out of range ({})", f.name(), text, range));
}

int64_t parse_int(const FieldSpec& f, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') bad_type(f, text);
  if (errno == ERANGE) out_of_range(f, text, "a 64-bit integer: at most 9223372036854775807");
  return v;
}

double parse_float(const FieldSpec& f, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') bad_type(f, text);
  if (errno == ERANGE) {
    out_of_range(f, text, "a 64-bit float: magnitudes from 2.2e-308 to 1.8e308, or 0");
  }
  return v;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

const std::vector<FieldSpec>& schema() {
  static const std::vector<FieldSpec> fields = build_schema();
  return fields;
}

const FieldSpec* find_field(const std::string& name) {
  for (const auto& f : schema()) {
    if (f.name() == name) return &f;
  }
  return nullptr;
}

std::string closest_field(const std::string& name) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& f : schema()) {
    size_t d = edit_distance(name, f.name());
    // A bare key ("steps") is matched against the key part too.
    d = std::min(d, edit_distance(name, f.key) + 1);
    if (d < best_d) {
      best_d = d;
      best = f.name();
    }
  }
  return best;
}

std::string type_name(FieldType type) {
  switch (type) {
    case FieldType::Bool: return "a boolean (true/false)";
    case FieldType::Int: return "an integer";
    case FieldType::OptionalInt: return "an integer or none";
    case FieldType::Float: return "a number";
    case FieldType::OptionalFloat: return "a number or none";
    case FieldType::String: return "a string";
    case FieldType::StringList: return "a comma-separated list of strings";
    case FieldType::StringLists:
      return "lists of strings (TOML [[\"a\", \"b\"], [\"c\"]]; command line a,b;c)";
  }
  return "?";
}

std::string format_value(const Value& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      std::string s = fmt::format("{}", d);
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep TOML float syntax
      return s;
    }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const std::vector<std::string>& v) const {
      std::vector<std::string> q;
      for (const auto& s : v) q.push_back(quote(s));
      return "[" + join(q, ", ") + "]";
    }
    std::string operator()(const std::vector<std::vector<std::string>>& lists) const {
      std::vector<std::string> q;
      for (const auto& v : lists) q.push_back((*this)(v));
      return "[" + join(q, ", ") + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

namespace {

// The items of `text` between `sep`s; empty ones only `with_empty`.
std::vector<std::string> split(const std::string& text, char sep, bool with_empty = false) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (with_empty || !item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

Value parse_value(const FieldSpec& f, const std::string& text) {
  bool optional = f.type == FieldType::OptionalInt || f.type == FieldType::OptionalFloat;
  if (optional && (text == "none" || text == "None")) return std::monostate{};
  switch (f.type) {
    case FieldType::Bool:
      if (text == "true" || text == "True" || text == "1") return true;
      if (text == "false" || text == "False" || text == "0") return false;
      bad_type(f, text);
    case FieldType::Int:
    case FieldType::OptionalInt: return parse_int(f, text);
    case FieldType::Float:
    case FieldType::OptionalFloat: return parse_float(f, text);
    case FieldType::String: return text;
    case FieldType::StringList: return split(text, ',');
    case FieldType::StringLists: {
      std::vector<std::vector<std::string>> lists;
      // "a;;b" is three lists, the second empty (refused where an empty one is wrong).
      for (const auto& list : split(text, ';', true)) lists.push_back(split(list, ','));
      return lists;
    }
  }
  bad_type(f, text);
}

Value check_value(const FieldSpec& f, const Value& value) {
  auto same = [&](const std::string& a, const std::string& b) {
    return f.ignore_case ? std::equal(a.begin(), a.end(), b.begin(), b.end(),
                                      [](unsigned char x, unsigned char y) {
                                        return std::tolower(x) == std::tolower(y);
                                      })
                         : a == b;
  };
  auto choice = [&](const std::string& s) {
    if (f.choices.empty()) return s;
    for (const auto& c : f.choices) {
      if (same(s, c)) return c;
    }
    throw ConfigError(fmt::format("{} = '{}' is not allowed; allowed values{}: {}", f.name(), s,
                                  f.ignore_case ? " (in any case)" : "", join(f.choices, ", ")));
  };
  std::optional<double> number;
  if (auto i = std::get_if<int64_t>(&value)) number = static_cast<double>(*i);
  if (auto d = std::get_if<double>(&value)) number = *d;
  if (number && !std::isfinite(*number)) {
    throw ConfigError(fmt::format("{} = {} is not a finite number", f.name(), format_value(value)));
  }
  if (number && f.min && *number < *f.min) {
    throw ConfigError(fmt::format("{} = {} is out of range; it must be >= {}", f.name(),
                                  format_value(value), *f.min));
  }
  if (auto s = std::get_if<std::string>(&value)) return choice(*s);
  if (auto list = std::get_if<std::vector<std::string>>(&value)) {
    std::vector<std::string> out;
    for (const auto& s : *list) out.push_back(choice(s));
    return out;
  }
  return value;
}

}  // namespace titan::config
