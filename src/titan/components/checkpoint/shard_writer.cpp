#include "titan/components/checkpoint/shard_writer.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "titan/components/checkpoint/file_io.h"
#include "titan/components/checkpoint/safetensors.h"
#include "titan/errors.h"

namespace titan::components::checkpoint {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw CheckpointError(fmt::format("{}: missing (did every rank finish writing its part?)",
                                      path));
  }
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
}

// Adds `part`'s records of one rank to `merged`, checking that ranks agree on dtype and shape.
void merge(SectionRecords& merged, const SectionRecords& part, const std::string& where) {
  for (const auto& [section, tensors] : part) {
    auto& into = merged[section];
    for (const auto& [name, t] : tensors) {
      auto [it, inserted] = into.emplace(name, TensorRecord{t.dtype, t.global_shape, {}});
      if (!inserted && (it->second.dtype != t.dtype || it->second.global_shape != t.global_shape)) {
        throw CheckpointError(fmt::format("{}: tensor '{}' ({} {}) disagrees with another rank's "
                                          "piece ({} {})",
                                          where, name, c10::toString(t.dtype),
                                          nlohmann::json(t.global_shape).dump(),
                                          c10::toString(it->second.dtype),
                                          nlohmann::json(it->second.global_shape).dump()));
      }
      it->second.chunks.insert(it->second.chunks.end(), t.chunks.begin(), t.chunks.end());
    }
  }
}

// Checks that the chunks of every tensor tile its rows exactly once.
void check_coverage(SectionRecords& merged, const std::string& dir) {
  for (auto& [section, tensors] : merged) {
    for (auto& [name, t] : tensors) {
      std::stable_sort(t.chunks.begin(), t.chunks.end(), [](const Chunk& a, const Chunk& b) {
        return a.row_offset < b.row_offset;
      });
      int64_t next = 0;
      const Chunk* previous = nullptr;
      for (const auto& c : t.chunks) {
        if (c.row_offset < next) {
          throw CheckpointError(fmt::format("{}: {} tensor '{}': rows [{}, {}) are written by "
                                            "both {} and {} (only one replica may have writer = "
                                            "true)",
                                            dir, section, name, c.row_offset, next, previous->file,
                                            c.file));
        }
        if (c.row_offset > next) break;
        next = c.row_offset + c.rows;
        previous = &c;
      }
      if (next != distributed::global_rows(t.global_shape)) {
        throw CheckpointError(
            fmt::format("{}: {} tensor '{}': rows from {} of {} are written by "
                        "no rank (every row needs one piece with writer = true)",
                        dir, section, name, next, distributed::global_rows(t.global_shape)));
      }
    }
  }
}

}  // namespace

std::string rank_data_file(int rank) { return fmt::format("rank_{}.bin", rank); }
std::string rank_index_file(int rank) { return fmt::format("rank_{}.json", rank); }

void write_rank_part(const std::string& dir, int rank, const SectionsView& sections,
                     const nlohmann::json& rank_state) {
  const std::string data_name = rank_data_file(rank);
  const std::string data_path = (fs::path(dir) / data_name).string();
  SectionRecords records;
  std::vector<torch::Tensor> keep;  // host copies the spans point into
  std::vector<ByteSpan> spans;
  uint64_t offset = 0;
  for (const auto& [section, dict] : sections) {
    auto& out = records[section];
    for (const auto& [name, piece] : *dict) {
      distributed::check_piece(name, piece);
      TensorRecord record{piece.local.scalar_type(), piece.global_shape, {}};
      safetensors_dtype_name(record.dtype, name, data_path);
      const int64_t rows = distributed::local_rows(piece);
      if (piece.writer && rows > 0) {
        auto host = piece.local.to(torch::kCPU).contiguous();  // host: local's shape
        const uint64_t bytes = host.numel() * host.element_size();
        record.chunks.push_back(Chunk{data_name, piece.row_offset, rows, offset, bytes});
        spans.push_back(ByteSpan{host.data_ptr(), bytes});
        keep.push_back(std::move(host));
        offset += bytes;
      }
      out.emplace(name, std::move(record));
    }
  }
  write_file_synced(data_path, spans);
  const nlohmann::json index = {
      {"rank", rank},
      {"file", {{"name", data_name}, {"bytes", offset}, {"sha256", file_sha256(data_path)}}},
      {"sections", sections_to_json(records)},
      {"state", rank_state}};
  write_file_synced((fs::path(dir) / rank_index_file(rank)).string(), index.dump());
}

CheckpointMetadata finalize_checkpoint(const std::string& dir, int world_size,
                                       const CheckpointHeader& header,
                                       const std::vector<std::string>& extra_files) {
  CheckpointMetadata m;
  m.step = header.step;
  m.model = header.model;
  m.model_only = header.model_only;
  m.world_size = world_size;
  for (int r = 0; r < world_size; ++r) {
    const std::string index_path = (fs::path(dir) / rank_index_file(r)).string();
    const nlohmann::json index = read_json(index_path);
    const std::string data_name = rank_data_file(r);
    if (!index.is_object() || index.value("rank", -1) != r || !index.contains("file") ||
        !index["file"].is_object() || index["file"].value("name", "") != data_name ||
        !index.contains("sections") || !index.contains("state")) {
      throw CheckpointError(fmt::format("{}: not the index of rank {}'s part", index_path, r));
    }
    const auto& file = index["file"];
    FileRecord record{file.value("bytes", uint64_t{0}), file.value("sha256", "")};
    std::error_code ec;
    const auto actual = fs::file_size(fs::path(dir) / data_name, ec);
    if (ec || actual != record.bytes) {
      throw CheckpointError(fmt::format("{}: {} (its index records {} bytes)",
                                        (fs::path(dir) / data_name).string(),
                                        ec ? "missing" : fmt::format("{} bytes", actual),
                                        record.bytes));
    }
    m.files.emplace(data_name, record);
    merge(m.sections, sections_from_json(index["sections"], index_path), index_path);
    m.rank_states.push_back(index["state"]);
  }
  check_coverage(m.sections, dir);
  for (const auto& name : extra_files) {
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    const auto bytes = fs::file_size(path, ec);
    if (ec) throw CheckpointError(fmt::format("{}: missing ({})", path, ec.message()));
    m.files.emplace(name, FileRecord{bytes, file_sha256(path)});
  }
  write_metadata(dir, m);
  for (int r = 0; r < world_size; ++r) fs::remove(fs::path(dir) / rank_index_file(r));
  sync_path(dir);
  return m;
}

}  // namespace titan::components::checkpoint
