// The Hugging Face tokenizer.json loader against reference ids from the Rust `tokenizers`
// crate (TITAN_SHARED_DATA/tokenizers/*/reference_ids.jsonl, see the README there).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/process.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/errors.h"

namespace titan::components {
namespace unit_components_tokenizer_hf_tokenizer_test {

const std::string kTokenizers = std::string(TITAN_SHARED_DATA) + "/tokenizers/";

// Each tokenizer is loaded once for the whole test program.
const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& slot = loaded[name];
  if (!slot) slot = load_tokenizer(kTokenizers + name);
  return *slot;
}

struct Reference {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<Reference> references(const std::string& name) {
  std::ifstream in(kTokenizers + name + "/reference_ids.jsonl");
  std::vector<Reference> rows;
  for (std::string line; std::getline(in, line);) {
    auto row = nlohmann::json::parse(line);
    rows.push_back({row["text"], row["ids"], row["decoded"]});
  }
  return rows;
}

class HfReference : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReference, EveryLineEncodesAndDecodesAsTheRustCrate) {
  const Tokenizer& tok = tokenizer(GetParam());
  const auto rows = references(GetParam());
  ASSERT_EQ(rows.size(), 72u);
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i + 1) + ": " + rows[i].text.substr(0, 60));
    EXPECT_EQ(tok.encode(rows[i].text), rows[i].ids);
    EXPECT_EQ(tok.decode(rows[i].ids), rows[i].decoded);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, HfReference,
                         ::testing::Values("llama3", "qwen3", "deepseek_v3"));

TEST(HfTokenizer, Llama3VocabAndSpecialIds) {
  const Tokenizer& tok = tokenizer("llama3");
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.eos_id(), 128001);
  EXPECT_EQ(tok.describe(), "hf:" + kTokenizers + "llama3/tokenizer.json");
}

TEST(HfTokenizer, Qwen3VocabAndSpecialIds) {
  const Tokenizer& tok = tokenizer("qwen3");
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_EQ(tok.eos_id(), 151645);
}

TEST(HfTokenizer, DeepSeekV3VocabAndSpecialIds) {
  const Tokenizer& tok = tokenizer("deepseek_v3");
  EXPECT_EQ(tok.vocab_size(), 128815);
  EXPECT_EQ(tok.bos_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.decode({0}), "<｜begin▁of▁sentence｜>");
}

// Ids from the Rust crate (npm @anush008/tokenizers 0.6.0 = tokenizers 0.22.2), for text where
// regex engines or Unicode tables differ: U+180E (not white space in Unicode >= 6.3, but in
// PCRE2's \s), U+0085 and C0 controls, case-insensitive contractions ('\u017F' folds to 's'),
// and NFC composition of Hangul jamo and combining accents (qwen3).
TEST(HfTokenizer, UnicodeEdgeCasesMatchTheRustCrate) {
  const std::vector<std::string> texts = {" \u180E_B\u2029\u180Ex", "a \u0085b\u0085 \u00A0",
                                          "IT'\u017F HE'D", "\u1100\u1161\u11A8 e\u0301",
                                          "\x01\x1C \x1F\t\x0B\x0C"};
  const std::map<std::string, std::vector<std::vector<int32_t>>> expected = {
      {"llama3",
       {{87189, 254, 236, 62, 33, 378, 102, 157, 254, 236, 87},
        {64, 220, 116360, 65, 116360, 17529},
        {964, 6, 129, 123, 11947, 28805},
        {157, 226, 222, 157, 227, 94, 157, 228, 101, 384, 54939},
        {189, 216, 220, 219, 197, 199, 200}}},
      {"qwen3",
       {{86089, 254, 236, 62, 33, 378, 102, 123970, 236, 87},
        {64, 220, 126, 227, 65, 126, 227, 17091},
        {952, 6, 144815, 11685, 27705},
        {126317, 3958},
        {189, 216, 220, 219, 197, 199, 200}}},
      {"deepseek_v3",
       {{223, 115522, 239, 14568, 300, 105, 115522, 239, 90},
        {67, 223, 129, 230, 68, 129, 230, 13714},
        {2992, 9, 75929, 21330, 9, 38},
        {91669, 225, 160, 230, 97, 77738, 104, 312, 17793},
        {192, 219, 223, 222, 200, 202, 203}}}};
  for (const auto& [name, ids] : expected) {
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(tokenizer(name).encode(texts[i]), ids[i]) << name << " text " << i;
    }
  }
}

TEST(HfTokenizer, AddedTokensMatchLongestFirst) {
  const Tokenizer& tok = tokenizer("qwen3");
  // <|im_start|> is matched whole, not as '<|' + 'im_start' + '|>'.
  EXPECT_EQ(tok.encode("<|im_start|>"), std::vector<int32_t>{151644});
  EXPECT_EQ(tok.encode("a<|im_end|>b").size(), 3u);
}

// Vocabularies that lack bytes (tests/data/tokenizers, recorded with tokenizers 0.22.2 by
// scripts/record_hf_tokenizer_ids.py): TorchTitan's own test tokenizer, and one constructed
// tokenizer per way Hugging Face's BPE treats a missing byte-level character (dropped, the
// unknown token, fused unknown tokens, byte fallback).
class MissingBytes : public ::testing::TestWithParam<std::string> {};

TEST_P(MissingBytes, LoadsAndEncodesIdForIdAsHuggingFace) {
  const std::string dir = std::string(TITAN_SOURCE_DIR) + "/tests/data/tokenizers/" + GetParam();
  const auto tok = load_tokenizer(dir);
  std::ifstream in(dir + "/reference_ids.jsonl");
  int rows = 0;
  for (std::string line; std::getline(in, line); ++rows) {
    const auto row = nlohmann::json::parse(line);
    EXPECT_EQ(tok->encode(row["text"].get<std::string>()), row["ids"].get<std::vector<int32_t>>())
        << GetParam() << ": " << row["text"].dump();
  }
  EXPECT_EQ(rows, 15);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, MissingBytes,
                         ::testing::Values("torchtitan_test", "missing_bytes_drop",
                                         "missing_bytes_unk", "missing_bytes_fuse_unk",
                                         "missing_bytes_byte_fallback"));

TEST(HfTokenizer, TorchTitansTestTokenizerTakesItsSpecialIdsFromTheConfig) {
  const auto tok =
      load_tokenizer(std::string(TITAN_SOURCE_DIR) + "/tests/data/tokenizers/torchtitan_test");
  EXPECT_EQ(tok->vocab_size(), 2020);
  EXPECT_EQ(tok->bos_id(), 2002);
  EXPECT_EQ(tok->eos_id(), 2003);
}

TEST(HfTokenizer, AnUnknownTokenOutsideTheVocabularyIsRefusedWhenAByteNeedsIt) {
  const auto dir = titan::testing::make_temp_dir("unk_token");
  std::ifstream in(std::string(TITAN_SOURCE_DIR) +
                   "/tests/data/tokenizers/missing_bytes_drop/tokenizer.json");
  auto doc = nlohmann::json::parse(in);
  doc["model"]["unk_token"] = "<not there>";
  std::ofstream(dir / "tokenizer.json") << doc.dump();
  try {
    load_tokenizer((dir / "tokenizer.json").string());
    ADD_FAILURE() << "loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("model.unk_token: '<not there>'"), std::string::npos)
        << e.what();
  }
}

TEST(HfTokenizer, DecodeRejectsIdsOutsideTheVocab) {
  const Tokenizer& tok = tokenizer("llama3");
  EXPECT_THROW(tok.decode({128256}), DataError);
  EXPECT_THROW(tok.decode({-1}), DataError);
}

TEST(HfTokenizer, EncodeIsThreadSafe) {
  const Tokenizer& tok = tokenizer("qwen3");
  const auto rows = references("qwen3");
  std::vector<std::vector<std::vector<int32_t>>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&] {
      for (const auto& row : rows) result.push_back(tok.encode(row.text));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& result : results) {
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(result[i], rows[i].ids) << "line " << i + 1;
  }
}

}  // namespace unit_components_tokenizer_hf_tokenizer_test
}  // namespace titan::components
