// Tokenizer throughput: encodes a corpus (argv[1], e.g. tinyshakespeare.txt) with each tokenizer
// on one thread and prints MB/s (10^6 bytes of text per second), first with an empty word cache
// and then warm, plus tokens and bytes per token. Tokenizers: argv[2...] (paths as
// load_tokenizer takes them), by default the byte tokenizer, llama3, qwen3 and deepseek_v3 from
// TITAN_SHARED_DATA/tokenizers, and the tiktoken test model.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "titan/components/tokenizer/tokenizer.h"
#include "titan/components/tokenizer/tokenizer_files.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> default_tokenizers() {
  const std::string dir = std::string(TITAN_SHARED_DATA) + "/tokenizers/";
  return {"byte", dir + "llama3", dir + "qwen3", dir + "deepseek_v3",
          dir + "tiktoken_test/test_tiktoken.model"};
}

// Seconds to encode `text`, and the ids.
double time_encode(const titan::components::Tokenizer& tok, const std::string& text,
                   std::vector<int32_t>& ids) {
  auto start = Clock::now();
  ids = tok.encode(text);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void bench(const std::string& path, const std::string& text) {
  auto start = Clock::now();
  auto tok = titan::components::load_tokenizer(path);
  double load_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<int32_t> ids;
  double cold_s = time_encode(*tok, text, ids);
  double warm_s = time_encode(*tok, text, ids);
  for (int i = 0; i < 2; ++i) warm_s = std::min(warm_s, time_encode(*tok, text, ids));
  const bool round_trip = tok->decode(ids) == text;
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::cout << fmt::format(
      "{:<60} load {:5.2f}s  cold {:6.2f} MB/s  warm {:6.2f} MB/s  "
      "{} tokens ({:.2f} bytes/token){}\n",
      tok->describe(), load_s, mb / cold_s, mb / warm_s, ids.size(),
      static_cast<double>(text.size()) / static_cast<double>(ids.size()),
      round_trip ? "" : "  ROUND TRIP DIFFERS");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "Usage: tokenizer_bench CORPUS.txt [TOKENIZER...]\n";
    return 2;
  }
  const std::string text = titan::components::tokenizer::read_text_file(argv[1]);
  std::cout << fmt::format("corpus {}: {} bytes, one thread\n", argv[1], text.size());
  std::vector<std::string> paths(argv + 2, argv + argc);
  if (paths.empty()) paths = default_tokenizers();
  for (const auto& path : paths) bench(path, text);
  return 0;
}
