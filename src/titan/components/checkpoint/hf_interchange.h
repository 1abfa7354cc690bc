// Hugging Face interchange of titan checkpoints: a checkpoint's model exported as a Hugging Face
// folder (config.json + safetensors, HF names, bf16 or fp32), a Hugging Face folder imported as a
// titan checkpoint, and sharded model pieces filled straight from a Hugging Face folder
// (checkpoint.initial_load_in_hf). Names, shapes and config.json go through the family's
// TrainSpec (to_hf, from_hf, hf_config, build_from_hf), as TorchTitan's state-dict adapters do.
// Each of these holds one full copy of the model in host memory.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "titan/components/checkpoint/checkpoint_metadata.h"
#include "titan/components/checkpoint/hf_folder.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/protocols/train_spec.h"

namespace titan::components::checkpoint {

struct HfExportOptions {
  torch::ScalarType dtype = torch::kFloat32;  // floating-point weights are written in this dtype
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;  // see write_hf_folder
};

/// Every parameter and buffer (MoE expert biases) of `model` as a whole piece: what a
/// checkpoint's model section holds, to read one into a whole model or write one from it.
distributed::ShardedStateDict whole_model_state(models::CausalLM& model);

/// The dtype checkpoint.export_dtype names: "float32", "bfloat16" or "float16". Throws
/// ConfigError naming `key` and the valid names otherwise.
torch::ScalarType export_dtype(const std::string& name, const std::string& key);

/// Writes the model of the checkpoint folder `step_dir` as the Hugging Face folder `out_dir`:
/// the recorded family's model of the recorded flavor is built on CPU, filled from the
/// checkpoint (read_sections: verified, any layout), and written with to_hf names, hf_config as
/// config.json (torch_dtype set to the export dtype) and write_hf_folder's sharding; a non-zero
/// buffer the format has no place for (Qwen3-MoE's expert biases) is warned about. Throws
/// ConfigError for a family or flavor this build does not know, CheckpointError as
/// read_metadata / read_sections / write_hf_folder do.
void export_checkpoint_to_hf(const std::string& step_dir, const std::string& out_dir,
                             const HfExportOptions& options);

/// The flavor of `spec` whose hf_config agrees with `config` on every key hf_config writes
/// (torch_dtype and architectures aside). Throws CheckpointError naming the config and, for each
/// flavor, the first key that differs, when none matches.
std::string flavor_for_hf_config(const protocols::TrainSpec& spec, const nlohmann::json& config);

/// Writes the Hugging Face folder `hf_dir` as the titan checkpoint folder `step_dir` (one rank,
/// model only, step `step`): the model of `family` and `flavor` (empty: flavor_for_hf_config)
/// takes the weights through from_hf, which checks every name and shape. Written to
/// `step_dir`.tmp and renamed into place. Returns the identity recorded. Throws ConfigError for
/// an unknown family or flavor, CheckpointError when config.json's model_type is not the
/// family's, and as load_hf_folder / from_hf / finalize_checkpoint do.
ModelIdentity import_hf_to_checkpoint(const std::string& hf_dir, const std::string& step_dir,
                                      const std::string& family, const std::string& flavor,
                                      int64_t step = 0);

/// Fills the model pieces `model` (titan parameter names, any sharding) from the Hugging Face
/// folder `hf_dir`: a model of `family` shaped as its config.json says (build_from_hf) takes the
/// weights through from_hf, then each piece copies its rows of the parameter (or buffer: expert
/// biases, zeros where the format has none) of its name.
/// Throws CheckpointError when config.json's model_type is not the family's, naming a piece
/// without such a parameter or whose global shape differs from it, and as load_hf_folder /
/// from_hf do.
void load_hf_into_pieces(const std::string& hf_dir, const std::string& family,
                         distributed::ShardedStateDict& model);

}  // namespace titan::components::checkpoint
