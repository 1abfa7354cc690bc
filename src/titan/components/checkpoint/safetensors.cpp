#include "titan/components/checkpoint/safetensors.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "titan/errors.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reader copies bytes as they are");

namespace titan::components {
namespace {

namespace fs = std::filesystem;

// The format caps the header at 100 MB so that a corrupt length cannot exhaust memory.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeName {
  const char* name;
  torch::ScalarType dtype;
};
constexpr std::array<DtypeName, 10> kDtypes = {{
    {"F64", torch::kFloat64},
    {"F32", torch::kFloat32},
    {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16},
    {"I64", torch::kInt64},
    {"I32", torch::kInt32},
    {"I16", torch::kInt16},
    {"I8", torch::kInt8},
    {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
}};

std::string valid_dtype_names() {
  std::string out;
  for (const auto& d : kDtypes) {
    out += (out.empty() ? "" : ", ") + std::string(d.name);
  }
  return out;
}

std::vector<int64_t> parse_u64_array(const nlohmann::json& j, const char* field,
                                     const std::string& tensor, const std::string& path) {
  if (!j.is_array()) {
    throw CheckpointError(fmt::format("{}: tensor '{}': '{}' must be an array of non-negative "
                                      "integers",
                                      path, tensor, field));
  }
  std::vector<int64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > uint64_t(INT64_MAX)) {
      throw CheckpointError(fmt::format("{}: tensor '{}': '{}' must hold non-negative integers, "
                                        "got {}",
                                        path, tensor, field, v.dump()));
    }
    out.push_back(static_cast<int64_t>(v.get<uint64_t>()));
  }
  return out;
}

// The format's __metadata__: a string-to-string map.
void check_metadata(const nlohmann::json& metadata, const std::string& path) {
  if (!metadata.is_object()) {
    throw CheckpointError(fmt::format("{}: bad safetensors header: __metadata__ must be an "
                                      "object of strings, got {}",
                                      path, metadata.type_name()));
  }
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      throw CheckpointError(fmt::format("{}: bad safetensors header: __metadata__ '{}' must be "
                                        "a string, got {}",
                                        path, key, value.dump()));
    }
  }
}

// The tensors' byte ranges must tile the data section exactly: from 0, each one starting where
// the previous ends (no two tensors sharing bytes, no unindexed hole), and ending at its end (no
// trailing bytes), as Hugging Face's reader requires. Zero-size tensors take no bytes.
void check_data_coverage(std::vector<SafetensorsEntry> entries, uint64_t data_size,
                         const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  std::string previous;
  for (const auto& e : entries) {
    if (e.begin < covered) {
      throw CheckpointError(fmt::format("{}: tensor '{}': data_offsets [{}, {}] overlap tensor "
                                        "'{}', which ends at {}",
                                        path, e.name, e.begin, e.end, previous, covered));
    }
    if (e.begin > covered) {
      throw CheckpointError(fmt::format("{}: tensor '{}': data_offsets [{}, {}] leave bytes [{}, "
                                        "{}) of the data section indexed by no tensor",
                                        path, e.name, e.begin, e.end, covered, e.begin));
    }
    covered = e.end;
    previous = e.name;
  }
  if (covered != data_size) {
    throw CheckpointError(fmt::format("{}: the tensors cover {} bytes but the data section has {}: "
                                      "{} trailing bytes indexed by no tensor",
                                      path, covered, data_size, data_size - covered));
  }
}

struct Header {
  uint64_t data_start = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries;
};

Header parse_header(const std::string& path) {
  std::error_code ec;
  const auto file_size = fs::file_size(path, ec);
  if (ec) {
    throw CheckpointError(fmt::format("{}: cannot open safetensors file ({})", path, ec.message()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw CheckpointError(fmt::format("{}: cannot open safetensors file", path));
  }
  if (file_size < 8) {
    throw CheckpointError(fmt::format("{}: truncated safetensors file: {} bytes, shorter than the "
                                      "8-byte header length",
                                      path, file_size));
  }
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    throw CheckpointError(fmt::format("{}: bad safetensors header: header length {} exceeds the "
                                      "{} bytes after the length field{}",
                                      path, header_len, file_size - 8,
                                      header_len > kMaxHeaderBytes ? " or the 100 MB limit" : ""));
  }
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (text.empty() || text[0] != '{') {
    throw CheckpointError(fmt::format("{}: bad safetensors header: it must start with '{{'",
                                      path));
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw CheckpointError(fmt::format("{}: bad safetensors header: not valid JSON ({})", path,
                                      e.what()));
  }
  if (!json.is_object()) {
    throw CheckpointError(fmt::format("{}: bad safetensors header: expected a JSON object, got {}",
                                      path, json.type_name()));
  }
  Header header;
  header.data_start = 8 + header_len;
  const uint64_t data_size = file_size - header.data_start;
  for (const auto& [name, info] : json.items()) {
    if (name == "__metadata__") {
      check_metadata(info, path);
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
        !info.contains("shape") || !info.contains("data_offsets")) {
      throw CheckpointError(fmt::format("{}: bad safetensors header: tensor '{}' needs 'dtype' "
                                        "(string), 'shape' and 'data_offsets', got {}",
                                        path, name, info.dump()));
    }
    SafetensorsEntry e;
    e.name = name;
    e.dtype = parse_safetensors_dtype(info["dtype"].get<std::string>(), name, path);
    e.shape = parse_u64_array(info["shape"], "shape", name, path);
    auto offsets = parse_u64_array(info["data_offsets"], "data_offsets", name, path);
    if (offsets.size() != 2 || offsets[1] < offsets[0]) {
      throw CheckpointError(fmt::format("{}: tensor '{}': data_offsets must be [begin, end] with "
                                        "begin <= end, got {}",
                                        path, name, info["data_offsets"].dump()));
    }
    e.begin = static_cast<uint64_t>(offsets[0]);
    e.end = static_cast<uint64_t>(offsets[1]);
    uint64_t expected = c10::elementSize(e.dtype);
    bool overflow = false;
    for (int64_t d : e.shape) overflow |= __builtin_mul_overflow(expected, uint64_t(d), &expected);
    if (overflow || e.end - e.begin != expected) {
      throw CheckpointError(fmt::format("{}: tensor '{}': data_offsets [{}, {}] span {} bytes but "
                                        "dtype {} x shape {} needs {}",
                                        path, name, e.begin, e.end, e.end - e.begin,
                                        info["dtype"].get<std::string>(), info["shape"].dump(),
                                        expected));
    }
    if (e.end > data_size) {
      throw CheckpointError(fmt::format("{}: tensor '{}': data_offsets [{}, {}] lie beyond the "
                                        "{}-byte data section (file truncated or offsets out of "
                                        "range)",
                                        path, name, e.begin, e.end, data_size));
    }
    header.entries.push_back(std::move(e));
  }
  check_data_coverage(header.entries, data_size, path);
  std::sort(header.entries.begin(), header.entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return header;
}

}  // namespace

const char* safetensors_dtype_name(torch::ScalarType dtype, const std::string& tensor,
                                   const std::string& path) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  throw CheckpointError(fmt::format("{}: tensor '{}' has dtype {}, which safetensors cannot "
                                    "store here (valid: {})",
                                    path, tensor, c10::toString(dtype), valid_dtype_names()));
}

torch::ScalarType parse_safetensors_dtype(const std::string& name, const std::string& tensor,
                                          const std::string& path) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  throw CheckpointError(fmt::format("{}: tensor '{}' has unknown dtype '{}' (valid: {})", path,
                                    tensor, name, valid_dtype_names()));
}

std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path) {
  return parse_header(path).entries;
}

TensorMap read_safetensors(const std::string& path) {
  const Header header = parse_header(path);
  std::ifstream in(path, std::ios::binary);
  TensorMap out;
  for (const auto& e : header.entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));  // t: e.shape
    const auto bytes = static_cast<std::streamsize>(e.end - e.begin);
    in.seekg(static_cast<std::streamoff>(header.data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), bytes);
    if (!in || in.gcount() != bytes) {
      throw CheckpointError(fmt::format("{}: tensor '{}': could not read {} bytes at offset {}",
                                        path, e.name, bytes, header.data_start + e.begin));
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

TensorMap read_safetensors_folder(const std::string& dir) {
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index_path)) {
    if (!fs::exists(single_path)) {
      throw CheckpointError(fmt::format("{}: no model.safetensors or model.safetensors.index.json "
                                        "in this folder",
                                        dir));
    }
    return read_safetensors(single_path.string());
  }
  nlohmann::json index;
  try {
    std::ifstream in(index_path);
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}: not valid JSON ({})", index_path.string(), e.what()));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw CheckpointError(fmt::format("{}: expected an object with a 'weight_map' object",
                                      index_path.string()));
  }
  std::map<std::string, std::set<std::string>> names_by_file;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      throw CheckpointError(fmt::format("{}: weight_map['{}'] must be a file name, got {}",
                                        index_path.string(), name, file.dump()));
    }
    names_by_file[file.get<std::string>()].insert(name);
  }
  TensorMap out;
  for (const auto& [file, names] : names_by_file) {
    const std::string path = (fs::path(dir) / file).string();
    TensorMap shard = read_safetensors(path);
    for (const auto& name : names) {
      auto it = shard.find(name);
      if (it == shard.end()) {
        throw CheckpointError(fmt::format("{}: tensor '{}' listed in model.safetensors.index.json "
                                          "is not in this file",
                                          path, name));
      }
      out.emplace(name, it->second);
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    header["__metadata__"] = metadata;
  }
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const char* dtype = safetensors_dtype_name(tensor.scalar_type(), name, path);
    auto cpu = tensor.detach().to(torch::kCPU).contiguous();  // cpu: tensor's shape
    const uint64_t bytes = cpu.numel() * cpu.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(cpu));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw CheckpointError(fmt::format("{}: cannot open for writing", tmp));
    }
    unsigned char len_bytes[8];
    uint64_t len = text.size();
    for (int i = 0; i < 8; ++i, len >>= 8) len_bytes[i] = static_cast<unsigned char>(len & 0xff);
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : data) {
      out.write(static_cast<const char*>(t.data_ptr()),
                static_cast<std::streamsize>(t.numel() * t.element_size()));
    }
    out.flush();
    if (!out) {
      throw CheckpointError(fmt::format("{}: write failed (disk full or I/O error)", tmp));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    throw CheckpointError(fmt::format("{}: cannot rename {} into place ({})", path, tmp,
                                      ec.message()));
  }
}

}  // namespace titan::components
