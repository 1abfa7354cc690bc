#include "titan/components/checkpoint/checkpoint_metadata.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "titan/components/checkpoint/file_io.h"
#include "titan/components/checkpoint/safetensors.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/errors.h"

namespace titan::components::checkpoint {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", where, what));
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where,
                            const std::string& context) {
  if (!j.is_object() || !j.contains(key)) {
    bad(where, fmt::format("{}missing key '{}'", context, key));
  }
  return j[key];
}

uint64_t get_u64(const nlohmann::json& j, const char* key, const std::string& where,
                 const std::string& context) {
  const auto& v = field(j, key, where, context);
  if (!v.is_number_unsigned()) {
    bad(where, fmt::format("{}'{}' must be a non-negative integer, got {}", context, key,
                           v.dump()));
  }
  return v.get<uint64_t>();
}

int64_t get_i64(const nlohmann::json& j, const char* key, const std::string& where,
                const std::string& context) {
  const uint64_t v = get_u64(j, key, where, context);
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    bad(where, fmt::format("{}'{}' = {} is out of range", context, key, v));
  }
  return static_cast<int64_t>(v);
}

std::string get_string(const nlohmann::json& j, const char* key, const std::string& where,
                       const std::string& context) {
  const auto& v = field(j, key, where, context);
  if (!v.is_string()) {
    bad(where, fmt::format("{}'{}' must be a string, got {}", context, key, v.dump()));
  }
  return v.get<std::string>();
}

TensorRecord tensor_from_json(const nlohmann::json& j, const std::string& where,
                              const std::string& name) {
  const std::string ctx = fmt::format("tensor '{}': ", name);
  TensorRecord t;
  t.dtype = parse_safetensors_dtype(get_string(j, "dtype", where, ctx), name, where);
  const auto& shape = field(j, "global_shape", where, ctx);
  if (!shape.is_array()) bad(where, ctx + "'global_shape' must be an array");
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) bad(where, ctx + "'global_shape' must hold non-negative integers");
    t.global_shape.push_back(d.get<int64_t>());
  }
  const auto& chunks = field(j, "chunks", where, ctx);
  if (!chunks.is_array()) bad(where, ctx + "'chunks' must be an array");
  const uint64_t row_bytes =
      static_cast<uint64_t>(distributed::row_numel(t.global_shape)) * c10::elementSize(t.dtype);
  for (const auto& c : chunks) {
    Chunk chunk;
    chunk.file = get_string(c, "file", where, ctx);
    chunk.row_offset = get_i64(c, "row_offset", where, ctx);
    chunk.rows = get_i64(c, "rows", where, ctx);
    chunk.offset = get_u64(c, "offset", where, ctx);
    chunk.bytes = get_u64(c, "bytes", where, ctx);
    if (chunk.row_offset + chunk.rows > distributed::global_rows(t.global_shape)) {
      bad(where, fmt::format("{}chunk rows [{}, {}) lie beyond the {} rows of the tensor", ctx,
                             chunk.row_offset, chunk.row_offset + chunk.rows,
                             distributed::global_rows(t.global_shape)));
    }
    if (chunk.bytes != static_cast<uint64_t>(chunk.rows) * row_bytes) {
      bad(where, fmt::format("{}chunk of {} rows records {} bytes, {} expected", ctx, chunk.rows,
                             chunk.bytes, static_cast<uint64_t>(chunk.rows) * row_bytes));
    }
    t.chunks.push_back(std::move(chunk));
  }
  std::sort(t.chunks.begin(), t.chunks.end(),
            [](const Chunk& a, const Chunk& b) { return a.row_offset < b.row_offset; });
  return t;
}

}  // namespace

nlohmann::json sections_to_json(const SectionRecords& sections) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [section, tensors] : sections) {
    nlohmann::json js = nlohmann::json::object();
    for (const auto& [name, t] : tensors) {
      nlohmann::json chunks = nlohmann::json::array();
      for (const auto& c : t.chunks) {
        chunks.push_back({{"file", c.file},
                          {"row_offset", c.row_offset},
                          {"rows", c.rows},
                          {"offset", c.offset},
                          {"bytes", c.bytes}});
      }
      js[name] = {{"dtype", safetensors_dtype_name(t.dtype, name, section)},
                  {"global_shape", t.global_shape},
                  {"chunks", std::move(chunks)}};
    }
    out[section] = std::move(js);
  }
  return out;
}

SectionRecords sections_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "'sections' must be an object");
  SectionRecords out;
  for (const auto& [section, tensors] : j.items()) {
    if (!tensors.is_object()) bad(where, fmt::format("section '{}' must be an object", section));
    auto& records = out[section];
    for (const auto& [name, t] : tensors.items()) {
      records.emplace(name, tensor_from_json(t, where, name));
    }
  }
  return out;
}

nlohmann::json to_json(const CheckpointMetadata& m) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, f] : m.files) files[name] = {{"bytes", f.bytes}, {"sha256", f.sha256}};
  return {{"format", kFormatName},
          {"version", kFormatVersion},
          {"step", m.step},
          {"model", {{"family", m.model.family}, {"flavor", m.model.flavor}}},
          {"model_only", m.model_only},
          {"world_size", m.world_size},
          {"files", std::move(files)},
          {"sections", sections_to_json(m.sections)},
          {"rank_states", m.rank_states}};
}

CheckpointMetadata metadata_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("format", std::string()) != kFormatName) {
    bad(where, fmt::format("not a titan checkpoint (expected \"format\": \"{}\")", kFormatName));
  }
  const int64_t version = get_i64(j, "version", where, "");
  if (version != kFormatVersion) {
    bad(where, fmt::format("format version {} is not supported (this build reads version {})",
                           version, kFormatVersion));
  }
  CheckpointMetadata m;
  m.step = get_i64(j, "step", where, "");
  const auto& model = field(j, "model", where, "");
  m.model.family = get_string(model, "family", where, "model: ");
  m.model.flavor = get_string(model, "flavor", where, "model: ");
  const auto& model_only = field(j, "model_only", where, "");
  if (!model_only.is_boolean()) bad(where, "'model_only' must be true or false");
  m.model_only = model_only.get<bool>();
  m.world_size = static_cast<int>(get_i64(j, "world_size", where, ""));
  if (m.world_size < 1) bad(where, "'world_size' must be at least 1");
  const auto& files = field(j, "files", where, "");
  if (!files.is_object()) bad(where, "'files' must be an object");
  for (const auto& [name, f] : files.items()) {
    const std::string ctx = fmt::format("file '{}': ", name);
    m.files[name] =
        FileRecord{get_u64(f, "bytes", where, ctx), get_string(f, "sha256", where, ctx)};
  }
  m.sections = sections_from_json(field(j, "sections", where, ""), where);
  for (const auto& [section, tensors] : m.sections) {
    for (const auto& [name, t] : tensors) {
      for (const auto& c : t.chunks) {
        auto it = m.files.find(c.file);
        if (it == m.files.end()) {
          bad(where, fmt::format("tensor '{}' has a chunk in '{}', which 'files' does not list",
                                 name, c.file));
        }
        if (c.offset + c.bytes > it->second.bytes) {
          bad(where, fmt::format("tensor '{}': chunk bytes [{}, {}) lie beyond the {} bytes of "
                                 "'{}'",
                                 name, c.offset, c.offset + c.bytes, it->second.bytes, c.file));
        }
      }
    }
  }
  const auto& states = field(j, "rank_states", where, "");
  if (!states.is_array() || static_cast<int>(states.size()) != m.world_size) {
    bad(where, fmt::format("'rank_states' must be an array of world_size = {} values",
                           m.world_size));
  }
  for (const auto& state : states) {
    if (!state.is_object()) {
      bad(where, fmt::format("rank_states[{}] must be an object", m.rank_states.size()));
    }
    m.rank_states.push_back(state);
  }
  return m;
}

CheckpointMetadata read_metadata(const std::string& step_dir) {
  const std::string path = (fs::path(step_dir) / kMetadataFile).string();
  if (!fs::is_directory(step_dir)) bad(step_dir, "no such checkpoint folder");
  std::ifstream in(path);
  if (!in) {
    bad(path, "missing: the checkpoint is incomplete or not a titan checkpoint");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bad(path, fmt::format("not valid JSON ({})", e.what()));
  }
  return metadata_from_json(j, path);
}

void write_metadata(const std::string& step_dir, const CheckpointMetadata& metadata) {
  const std::string path = (fs::path(step_dir) / kMetadataFile).string();
  write_file_synced(path, to_json(metadata).dump(1));
  sync_path(step_dir);
}

}  // namespace titan::components::checkpoint
