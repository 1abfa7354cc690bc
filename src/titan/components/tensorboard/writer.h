// TensorBoard event files (metrics.enable_tensorboard): scalar summaries written as TensorBoard
// writes them, so its reader and UI open titan's runs (DESIGN.md "Outputs").
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace titan::components::tensorboard {

/// TFRecord's checksum: CRC-32C of `data`, rotated right by 15 bits plus 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);

/// One event file `events.out.tfevents.<seconds>.<host>.<pid>.0` in `folder` (created).
/// Each record is TFRecord-framed: the length (8 bytes, little-endian), its masked CRC, the
/// serialized Event, its masked CRC. The first event holds the file version.
class EventWriter {
 public:
  explicit EventWriter(const std::string& folder);

  /// One event at `step` holding a scalar summary per (tag, value); flushed to disk.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace titan::components::tensorboard
