// `titan tokenize`, run as users run it (TITAN_BINARY is the built binary).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace unit_cli_tokenize_command_test {

struct Result {
  int exit_code;
  std::string out;
};

// Runs `titan tokenize <args>` through the shell, capturing stdout (stderr is discarded).
Result tokenize(const std::string& args) {
  const std::string command = std::string(TITAN_BINARY) + " tokenize " + args + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kLlama3 = std::string(TITAN_SHARED_DATA) + "/tokenizers/llama3";

TEST(TokenizeCommand, PrintsIdsAsOneJsonArray) {
  Result r = tokenize("--tokenizer " + kLlama3 + " --text 'Hello world'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "[9906,1917]\n");
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json({9906, 1917}));
}

// A tokenizer whose vocabulary lacks bytes warns, on stderr: stdout stays the JSON array alone.
TEST(TokenizeCommand, WarningsStayOffStdout) {
  Result r = tokenize("--tokenizer " + std::string(TITAN_SOURCE_DIR) +
                      "/tests/data/tokenizers/torchtitan_test --text 'ab cd'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "[97,98,99,100]\n");
}

TEST(TokenizeCommand, ReadsAFile) {
  const auto path = std::filesystem::temp_directory_path() / "titan_tokenize_command_test.txt";
  std::ofstream(path) << "Hi";
  Result r = tokenize("--tokenizer=byte --file " + path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "[72,105]\n");
}

TEST(TokenizeCommand, EmptyTextGivesAnEmptyArray) {
  EXPECT_EQ(tokenize("--tokenizer byte --text ''").out, "[]\n");
}

TEST(TokenizeCommand, BadUsageExitsWithTwo) {
  EXPECT_EQ(tokenize("--text hi").exit_code, 2);
  EXPECT_EQ(tokenize("--tokenizer byte").exit_code, 2);
  EXPECT_EQ(tokenize("--tokenizer byte --text a --file b").exit_code, 2);
  EXPECT_EQ(tokenize("--tokenizer byte --colour red").exit_code, 2);
  EXPECT_EQ(tokenize("--tokenizer").exit_code, 2);
}

TEST(TokenizeCommand, MissingTokenizerFails) {
  Result r = tokenize("--tokenizer /nonexistent/tokenizer.json --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
}

}  // namespace unit_cli_tokenize_command_test
