// The safetensors file format (https://github.com/huggingface/safetensors, "Format"): an
// 8-byte little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of the header)
// plus an optional "__metadata__" string map, then the raw little-endian tensor bytes.
// Hugging Face model folders store their weights this way, sharded through
// model.safetensors.index.json when large.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace titan::components {

/// Tensors by name.
using TensorMap = std::map<std::string, torch::Tensor>;

/// One tensor's header entry. begin/end are byte offsets into the data section.
struct SafetensorsEntry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// The safetensors name of `dtype` ("F32", "BF16", ... as listed below); throws CheckpointError
/// naming `path` and `tensor` when the format has no name for it.
const char* safetensors_dtype_name(torch::ScalarType dtype, const std::string& tensor,
                                   const std::string& path);
/// The dtype a safetensors name stands for; throws CheckpointError naming `path`, `tensor` and
/// the valid names when `name` is not one.
torch::ScalarType parse_safetensors_dtype(const std::string& name, const std::string& tensor,
                                          const std::string& path);

/// The validated header of `path`: entries sorted by name. Supported dtypes: F64, F32, F16,
/// BF16, I64, I32, I16, I8, U8, BOOL. Throws CheckpointError naming the file (and the tensor
/// where one is at fault) when the file is missing or shorter than its header, the header is
/// not JSON of the expected shape, a dtype is unknown, a byte range does not match its
/// dtype x shape, or a range lies beyond the end of the file.
std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path);

/// Every tensor of `path`, as contiguous CPU tensors of the stored dtype and shape.
/// Throws CheckpointError as read_safetensors_header does, and when the data cannot be read.
TensorMap read_safetensors(const std::string& path);

/// The tensors of a Hugging Face weights folder: the files model.safetensors.index.json's
/// weight_map names, or else model.safetensors. Throws CheckpointError naming the folder when
/// neither exists, the index is malformed, or a tensor the index lists is missing from its file.
TensorMap read_safetensors_folder(const std::string& dir);

/// Writes `tensors` (any device, dtype among those above, any strides) to `path`: names sorted,
/// `__metadata__` = `metadata` first in the header, header space-padded to a multiple of 8 bytes,
/// data in name order. Writes `path`.tmp and renames it, so a crash never leaves a partial
/// `path`. Throws CheckpointError naming the file or the tensor with an unsupported dtype.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace titan::components
