// `titan generate` end to end on stories260K: greedy ids and the prompt loss from
// expected.json, and the errors for bad arguments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace unit_cli_generate_command_test {

struct Run {
  int status = -1;
  std::string out;
};

Run run(const std::string& args) {
  const std::string cmd = std::string(TITAN_BINARY) + " generate " + args + " 2>&1";
  Run r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kStories = std::string(TITAN_SHARED_DATA) + "/models/stories260K";

nlohmann::json expected() {
  std::ifstream in(kStories + "/expected.json");
  return nlohmann::json::parse(in);
}

TEST(GenerateCommand, GreedyIdsOfStories260K) {
  auto r = run("--hf_assets_path " + kStories + " --prompt_ids 1 --max_new_tokens 20");
  ASSERT_EQ(r.status, 0) << r.out;
  auto ids = expected()["greedy"]["ids"].get<std::vector<int64_t>>();
  std::ostringstream want;
  want << "ids:";
  for (int i = 0; i < 20; ++i) want << " " << ids[i];
  EXPECT_EQ(r.out, want.str() + "\n");
}

TEST(GenerateCommand, ScoreOfStories260K) {
  auto ids = expected()["prompt"]["input_ids"].get<std::vector<int64_t>>();
  std::string list;
  for (auto id : ids) list += fmt::format("{}{}", list.empty() ? "" : ",", id);
  auto r = run("--hf_assets_path=" + kStories + " --prompt_ids=" + list + " --score");
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_EQ(r.out.rfind("loss: ", 0), 0u) << r.out;
  EXPECT_NEAR(std::stod(r.out.substr(6)), expected()["prompt"]["mean_loss"].get<double>(), 1e-6);
}

TEST(GenerateCommand, TextPromptIsEncodedWithBos) {
  // The byte tokenizer: BOS = 256, 'H' = 72, 'i' = 105 (all inside stories260K's 512 ids).
  auto text = run("--hf_assets_path " + kStories + " --tokenizer byte --prompt Hi --score");
  auto ids = run("--hf_assets_path " + kStories + " --prompt_ids 256,72,105 --score");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_EQ(text.out, ids.out);
  auto no_tokenizer = run("--hf_assets_path " + kStories + " --prompt Hi");
  EXPECT_EQ(no_tokenizer.status, 2) << no_tokenizer.out;
  EXPECT_NE(no_tokenizer.out.find("--tokenizer"), std::string::npos) << no_tokenizer.out;
}

TEST(GenerateCommand, SamplingIsSeeded) {
  const std::string args = "--hf_assets_path " + kStories +
                           " --prompt_ids 1 --max_new_tokens 10 --temperature 1.0 --top_k 5";
  auto a = run(args + " --seed 3"), b = run(args + " --seed 3");
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
}

// Top-k and temperature have visible effects: top_k 1 is greedy whatever the temperature, and
// sampling at temperature 1 from the top 50 leaves the greedy path for some seed.
TEST(GenerateCommand, TopKAndTemperatureChangeTheIds) {
  const std::string prompt = "--hf_assets_path " + kStories + " --prompt_ids 1 --max_new_tokens 10";
  auto greedy = run(prompt);
  ASSERT_EQ(greedy.status, 0) << greedy.out;
  EXPECT_EQ(run(prompt + " --temperature 1.5 --top_k 1 --seed 4").out, greedy.out);
  std::set<std::string> sampled;
  for (int seed = 1; seed <= 4; ++seed) {
    const std::string seed_flag = " --seed " + std::to_string(seed);
    sampled.insert(run(prompt + " --temperature 1.0 --top_k 50" + seed_flag).out);
  }
  EXPECT_GT(sampled.size(), 1u) << "every seed sampled the same ids";
}

TEST(GenerateCommand, BadArgumentsExitWithConfigError) {
  auto unknown = run("--hf_assets_path " + kStories + " --prompt_ids 1 --beams 4");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.out.find("--beams"), std::string::npos) << unknown.out;
  auto bad_id = run("--hf_assets_path " + kStories + " --prompt_ids 1,x");
  EXPECT_EQ(bad_id.status, 2);
  EXPECT_NE(bad_id.out.find("'x'"), std::string::npos) << bad_id.out;
  auto out_of_vocab = run("--hf_assets_path " + kStories + " --prompt_ids 512");
  EXPECT_EQ(out_of_vocab.status, 2);
  auto no_folder = run("--hf_assets_path /nonexistent --prompt_ids 1");
  EXPECT_EQ(no_folder.status, 1);
  EXPECT_NE(no_folder.out.find("/nonexistent/config.json"), std::string::npos) << no_folder.out;
  // Issue 40: a missing checkpoint is named, not a missing tokenizer.
  auto no_checkpoint = run("--checkpoint /nonexistent/step-3 --prompt hi");
  EXPECT_EQ(no_checkpoint.status, 1);
  EXPECT_NE(no_checkpoint.out.find("/nonexistent/step-3: no such checkpoint folder"),
            std::string::npos)
      << no_checkpoint.out;
  EXPECT_EQ(no_checkpoint.out.find("needs a tokenizer"), std::string::npos) << no_checkpoint.out;
}

}  // namespace unit_cli_generate_command_test
