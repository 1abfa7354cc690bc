// safetensors: write -> read round trips for every dtype, the header layout, sharded folders,
// and one CheckpointError (naming file and tensor) per kind of corrupt file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "titan/components/checkpoint/safetensors.h"
#include "titan/errors.h"

namespace titan::components {
namespace unit_components_checkpoint_safetensors_test {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("safetensors_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file made of an 8-byte length, `header` and `data_bytes` zero bytes.
  std::string raw_file(const std::string& name, const std::string& header, size_t data_bytes) {
    std::ofstream out(path(name), std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
    return path(name);
  }

  std::string error_of(const std::string& file) {
    try {
      read_safetensors(file);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no CheckpointError";
  }

  fs::path dir_;
};

TensorMap sample() {
  torch::manual_seed(8);
  TensorMap t;
  t["f64"] = torch::randn({2, 3}, torch::kFloat64);
  t["f32.transposed"] = torch::randn({4, 5}).t();  // non-contiguous
  t["f16"] = torch::randn({7}).to(torch::kFloat16);
  t["bf16"] = torch::randn({2, 2, 2}).to(torch::kBFloat16);
  t["i64"] = torch::arange(-3, 3, torch::kInt64);
  t["i32"] = torch::arange(5, torch::kInt32);
  t["i16"] = torch::arange(4, torch::kInt16);
  t["i8"] = torch::arange(-2, 2, torch::kInt8);
  t["u8"] = torch::arange(250, 256, torch::kUInt8);
  t["bool"] = torch::tensor({true, false, true});
  t["scalar"] = torch::tensor(3.5);
  t["empty"] = torch::zeros({0, 4});
  return t;
}

TEST_F(Safetensors, RoundTripIsExact) {
  const auto tensors = sample();
  write_safetensors(path("a.safetensors"), tensors);
  const auto back = read_safetensors(path("a.safetensors"));
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_EQ(back.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.at(name).sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
  }
  EXPECT_FALSE(fs::exists(path("a.safetensors.tmp")));
}

TEST_F(Safetensors, HeaderLayout) {
  write_safetensors(path("a.safetensors"), sample());
  std::ifstream in(path("a.safetensors"), std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string text(n, '\0');
  in.read(text.data(), n);
  EXPECT_EQ(text.rfind("{\"__metadata__\":{\"format\":\"pt\"}", 0), 0u) << text;
  auto header = nlohmann::ordered_json::parse(text);
  std::vector<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    names.push_back(name);
    EXPECT_EQ(info["data_offsets"][0].get<uint64_t>(), offset) << name;
    offset = info["data_offsets"][1].get<uint64_t>();
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(fs::file_size(path("a.safetensors")), 8 + n + offset);
}

TEST_F(Safetensors, ReadsAHuggingFaceFile) {
  const std::string file = std::string(TITAN_SHARED_DATA) + "/models/llama3_tiny/model.safetensors";
  auto entries = read_safetensors_header(file);
  EXPECT_EQ(entries.size(), 21u);
  EXPECT_EQ(entries.front().name, "lm_head.weight");
  EXPECT_EQ(entries.front().dtype, torch::kFloat32);
  EXPECT_EQ(entries.front().shape, (std::vector<int64_t>{512, 128}));
  auto t = read_safetensors(file);
  int64_t total = 0;
  for (const auto& [name, tensor] : t) total += tensor.numel();
  EXPECT_EQ(total, 500352);
}

TEST_F(Safetensors, ShardedFolder) {
  auto tensors = sample();
  TensorMap first, second;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, t] : tensors) {
    const bool one = name < "i";
    (one ? first : second)[name] = t;
    index["weight_map"][name] = one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(path("model-00001-of-00002.safetensors"), first);
  write_safetensors(path("model-00002-of-00002.safetensors"), second);
  std::ofstream(path("model.safetensors.index.json")) << index.dump();
  auto back = read_safetensors_folder(dir_.string());
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) EXPECT_TRUE(torch::equal(back.at(name), t)) << name;

  index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
  std::ofstream(path("model.safetensors.index.json")) << index.dump();
  try {
    read_safetensors_folder(dir_.string());
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'ghost'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model-00001-of-00002.safetensors"), std::string::npos);
  }
}

TEST_F(Safetensors, EmptyFolderIsAnError) {
  EXPECT_THROW(read_safetensors_folder(dir_.string()), CheckpointError);
}

TEST_F(Safetensors, MissingFile) {
  EXPECT_NE(error_of(path("nope.safetensors")).find("nope.safetensors"), std::string::npos);
}

TEST_F(Safetensors, ShorterThanTheLengthField) {
  std::ofstream(path("short.safetensors"), std::ios::binary) << "abcd";
  const auto msg = error_of(path("short.safetensors"));
  EXPECT_NE(msg.find("short.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(Safetensors, HeaderLongerThanTheFile) {
  std::ofstream out(path("long.safetensors"), std::ios::binary);
  uint64_t n = 1000;
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << "{}";
  out.close();
  const auto msg = error_of(path("long.safetensors"));
  EXPECT_NE(msg.find("header length 1000"), std::string::npos) << msg;
}

TEST_F(Safetensors, HeaderNotJson) {
  const auto msg = error_of(raw_file("bad.safetensors", "{\"a\": [1, ", 0));
  EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST_F(Safetensors, HeaderNotAnObject) {
  EXPECT_NE(error_of(raw_file("arr.safetensors", "[1, 2]", 0)).find("must start with '{'"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file("space.safetensors", " {}", 0)).find("must start with '{'"),
            std::string::npos);
}

// What the format forbids and Hugging Face's reader rejects (issue 12): every case names the
// file and, where there is one, the tensor.
TEST_F(Safetensors, ByteRangesMustTileTheDataSection) {
  auto overlap = error_of(raw_file("overlap.safetensors",
                                   R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                   12));
  EXPECT_NE(overlap.find("overlap.safetensors: tensor 'b'"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("overlap tensor 'a'"), std::string::npos) << overlap;
  auto hole = error_of(raw_file("hole.safetensors",
                                R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                12));
  EXPECT_NE(hole.find("tensor 'b'"), std::string::npos) << hole;
  EXPECT_NE(hole.find("bytes [4, 8)"), std::string::npos) << hole;
  auto trailing = error_of(raw_file("trailing.safetensors",
                                    R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                    9));
  EXPECT_NE(trailing.find("trailing.safetensors"), std::string::npos) << trailing;
  EXPECT_NE(trailing.find("5 trailing bytes"), std::string::npos) << trailing;
}

TEST_F(Safetensors, MetadataValuesMustBeStrings) {
  auto msg = error_of(raw_file("meta.safetensors", R"({"__metadata__":{"format":1}})", 0));
  EXPECT_NE(msg.find("meta.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("__metadata__ 'format' must be a string"), std::string::npos) << msg;
}

TEST_F(Safetensors, AcceptsWhatTheFormatAllows) {
  // No tensors; a zero-size tensor between two others; a header of unaligned length.
  EXPECT_TRUE(read_safetensors(raw_file("none.safetensors", R"({"__metadata__":{}})", 0)).empty());
  auto t = read_safetensors(raw_file("zero.safetensors",
                                     R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                     R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},)"
                                     R"("b":{"dtype":"I8","shape":[3],"data_offsets":[4,7]}})",
                                     7));
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("z").sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(t.at("b").numel(), 3);
}

TEST_F(Safetensors, EntryWithoutShape) {
  const auto msg = error_of(raw_file("noshape.safetensors",
                                     R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4));
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

TEST_F(Safetensors, UnknownDtype) {
  const auto msg = error_of(raw_file("dtype.safetensors",
                                     R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_NE(msg.find("tensor 'w' has unknown dtype 'F8_E4M3'"), std::string::npos) << msg;
}

TEST_F(Safetensors, OffsetsDisagreeWithShape) {
  const auto msg = error_of(raw_file("size.safetensors",
                                     R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24));
  EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 24"), std::string::npos) << msg;
}

TEST_F(Safetensors, OffsetsOutOfRange) {
  const auto msg = error_of(raw_file("range.safetensors",
                                     R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})", 20));
  EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("beyond"), std::string::npos) << msg;
}

TEST_F(Safetensors, TruncatedData) {
  write_safetensors(path("cut.safetensors"), sample());
  fs::resize_file(path("cut.safetensors"), fs::file_size(path("cut.safetensors")) - 3);
  const auto msg = error_of(path("cut.safetensors"));
  EXPECT_NE(msg.find("cut.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'u8'"), std::string::npos) << msg;  // the last tensor in the file
}

TEST_F(Safetensors, UnsupportedDtypeOnWrite) {
  TensorMap t{{"c", torch::zeros({2}, torch::kComplexFloat)}};
  try {
    write_safetensors(path("c.safetensors"), t);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'c'"), std::string::npos) << e.what();
  }
}

}  // namespace unit_components_checkpoint_safetensors_test
}  // namespace titan::components
