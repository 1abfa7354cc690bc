// load_tokenizer: which loader a path picks, and the DataError each kind of bad input gives
// (the message must name the file).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "titan/components/tokenizer/byte_level.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/errors.h"

namespace titan::components {
namespace unit_components_tokenizer_load_tokenizer_test {

namespace fs = std::filesystem;
using nlohmann::json;

class LoadTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("titan_tok_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }

  // The message of the DataError that loading `path` throws ("" when nothing is thrown).
  static std::string load_error(const std::string& path) {
    try {
      load_tokenizer(path);
    } catch (const DataError& e) {
      return e.what();
    }
    return "";
  }

  // A byte-level BPE tokenizer.json: the 256 bytes, "ab" and "abc" with merges a+b, ab+c.
  static json minimal_hf() {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) {
      vocab[std::string(tokenizer::byte_level_char(static_cast<uint8_t>(b)))] = b;
    }
    vocab["ab"] = 256;
    vocab["abc"] = 257;
    return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "ab c"}}}},
            {"added_tokens",
             {{{"id", 258}, {"content", "<s>"}, {"special", true}},
              {{"id", 259}, {"content", "</s>"}, {"special", true}}}},
            {"pre_tokenizer",
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}}};
  }

  // A tiktoken file: the 256 bytes at ranks 0..255, then `extra` lines.
  static std::string minimal_tiktoken(const std::string& extra) {
    static const char* kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string text;
    for (int b = 0; b < 256; ++b) {
      text += {kAlphabet[b >> 2], kAlphabet[(b & 3) << 4], '=', '='};
      text += fmt::format(" {}\n", b);
    }
    return text + extra;
  }

  fs::path dir_;
};

TEST_F(LoadTokenizer, ReadsAMinimalTokenizerJsonAndItsConfig) {
  const std::string path = write("hf/tokenizer.json", minimal_hf().dump());
  write("hf/tokenizer_config.json",
        R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "pad_token": null})");
  auto tok = load_tokenizer(dir_.string() + "/hf");
  EXPECT_EQ(tok->describe(), "hf:" + path);
  EXPECT_EQ(tok->encode("abc ab<s>"), (std::vector<int32_t>{257, ' ', 256, 258}));
  EXPECT_EQ(tok->decode({257, 259}), "abc</s>");
  EXPECT_EQ(tok->vocab_size(), 260);
  EXPECT_EQ(tok->bos_id(), 258);
  EXPECT_EQ(tok->eos_id(), 259);
}

TEST_F(LoadTokenizer, SplitSpecialTokensEncodesThemAsText) {
  write("hf/tokenizer.json", minimal_hf().dump());
  write("hf/tokenizer_config.json", R"({"split_special_tokens": true})");
  auto tok = load_tokenizer(dir_.string() + "/hf/tokenizer.json");
  EXPECT_EQ(tok->encode("<s>"), (std::vector<int32_t>{'<', 's', '>'}));
  EXPECT_EQ(tok->bos_id(), std::nullopt);
}

TEST_F(LoadTokenizer, FolderWithATiktokenModel) {
  write("tk/tokenizer.model", minimal_tiktoken(""));
  auto tok = load_tokenizer(dir_.string() + "/tk");
  EXPECT_EQ(tok->describe(), "tiktoken:" + (dir_ / "tk" / "tokenizer.model").string());
  EXPECT_EQ(tok->vocab_size(), 512);
}

TEST_F(LoadTokenizer, MissingFile) {
  const std::string path = dir_.string() + "/nope/tokenizer.json";
  EXPECT_NE(load_error(path).find(path), std::string::npos) << load_error(path);
  const std::string model = dir_.string() + "/nope.model";
  EXPECT_NE(load_error(model).find(model), std::string::npos);
  const std::string other = dir_.string() + "/nothing_here";
  EXPECT_NE(load_error(other).find("no such tokenizer"), std::string::npos);
}

TEST_F(LoadTokenizer, FolderWithoutATokenizer) {
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(load_error((dir_ / "empty").string()).find("neither tokenizer.json"),
            std::string::npos);
}

TEST_F(LoadTokenizer, UnknownFormat) {
  const std::string path = write("vocab.txt", "hello");
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos);
  EXPECT_NE(error.find("unknown tokenizer format"), std::string::npos);
}

TEST_F(LoadTokenizer, CorruptJsonNamesFileAndPosition) {
  const std::string path = write("tokenizer.json", R"({"model": {"vocab": [1, 2)");
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("invalid JSON at byte 26"), std::string::npos) << error;
}

TEST_F(LoadTokenizer, UnsupportedModelType) {
  json doc = minimal_hf();
  doc["model"]["type"] = "WordPiece";
  const std::string path = write("tokenizer.json", doc.dump());
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("unsupported model 'WordPiece'"), std::string::npos) << error;
}

TEST_F(LoadTokenizer, UnsupportedPieces) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"decoder", {{"type", "Metaspace"}}}}, "decoder.type: 'Metaspace'"},
      {{{"normalizer", {{"type", "Lowercase"}}}}, "unsupported normalizer type 'Lowercase'"},
      {{{"pre_tokenizer", {{"type", "Whitespace"}}}}, "unsupported pre_tokenizer type"},
      {{{"pre_tokenizer",
         {{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Isolated"}}}},
       "cannot compile regex '('"},
      {{{"pre_tokenizer",
         {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}}}},
       "unknown split behavior 'Sideways'"}};
  for (const auto& [patch, expected] : cases) {
    json doc = minimal_hf();
    doc.update(patch);
    const std::string path = write("tokenizer.json", doc.dump());
    const std::string error = load_error(path);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
}

TEST_F(LoadTokenizer, MergeOfUnknownTokens) {
  json doc = minimal_hf();
  doc["model"]["merges"].push_back("abc d");  // "abcd" is not in the vocab
  const std::string path = write("tokenizer.json", doc.dump());
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("model.merges[2]: 'abcd' is not in the vocabulary"), std::string::npos)
      << error;
}

TEST_F(LoadTokenizer, BosThatIsNotAToken) {
  write("tokenizer.json", minimal_hf().dump());
  const std::string config = write("tokenizer_config.json", R"({"bos_token": "<bos>"})");
  const std::string error = load_error(dir_.string());
  EXPECT_NE(error.find(config), std::string::npos) << error;
  EXPECT_NE(error.find("bos_token: '<bos>' is not a token"), std::string::npos) << error;
}

TEST_F(LoadTokenizer, BadTiktokenLinesNameFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"YWI= 256\n!!!! 257\n", ":258: '!!!!' is not base64"},
      {"YWI= 256\nYWJj\n", ":258: expected 'base64-token rank'"},
      {"YWI= x\n", ":257: rank 'x' is not"},
      {"YWI= 256\nYWI= 257\n", ":258: the token or its rank appeared before"}};
  for (const auto& [extra, expected] : cases) {
    const std::string path = write("bad.model", minimal_tiktoken(extra));
    const std::string error = load_error(path);
    EXPECT_NE(error.find(path + expected), std::string::npos) << error;
  }
}

TEST_F(LoadTokenizer, TiktokenWithoutAllBytes) {
  const std::string path = write("short.model", "YQ== 0\n");
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("no token for byte 0x00"), std::string::npos) << error;
}

}  // namespace unit_components_tokenizer_load_tokenizer_test
}  // namespace titan::components
