// TFRecord framing: the masked CRC-32C of known inputs, and an event file's bytes framed as
// length, its CRC, the event, its CRC (the reader's own check is in the integration test).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "titan/components/tensorboard/writer.h"

namespace titan::components::tensorboard {
namespace unit_components_tensorboard_writer_test {

uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint32_t read_u32(const std::string& b, size_t at) {
  uint32_t x = 0;
  for (int i = 3; i >= 0; --i) x = (x << 8) | static_cast<uint8_t>(b[at + i]);
  return x;
}

TEST(MaskedCrc32c, MatchesTheCheckValues) {
  EXPECT_EQ(masked_crc32c("123456789"), mask(0xE3069283u));  // CRC-32C's check value
  EXPECT_EQ(masked_crc32c(""), mask(0u));
  EXPECT_EQ(masked_crc32c(std::string(32, '\0')), mask(0x8A9136AAu));  // RFC 3720 B.4
}

TEST(EventWriter, FramesEveryRecord) {
  const auto folder = std::filesystem::temp_directory_path() / "titan_tb_writer_test";
  std::filesystem::remove_all(folder);
  std::string path;
  {
    EventWriter writer(folder.string());
    writer.add_scalars(3, {{"loss", 2.5}, {"lr", 1e-3}});
    path = writer.path();
  }
  EXPECT_EQ(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  int records = 0;
  while (at < bytes.size()) {
    ASSERT_LE(at + 12, bytes.size());
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[at + i]);
    EXPECT_EQ(read_u32(bytes, at + 8), masked_crc32c(bytes.substr(at, 8)));
    ASSERT_LE(at + 12 + length + 4, bytes.size());
    EXPECT_EQ(read_u32(bytes, at + 12 + length), masked_crc32c(bytes.substr(at + 12, length)));
    at += 12 + length + 4;
    ++records;
  }
  EXPECT_EQ(records, 2) << "the file version, then one event of scalars";
  EXPECT_NE(bytes.find("brain.Event:2"), std::string::npos);
  EXPECT_NE(bytes.find("loss"), std::string::npos);
}

}  // namespace unit_components_tensorboard_writer_test
}  // namespace titan::components::tensorboard
