#include "titan/components/tokenizer/byte_level.h"

#include <array>

namespace titan::components::tokenizer {
namespace {

// Printable bytes keep their own code point; the other 68 (controls, space, 0x7F-0xA0, 0xAD)
// take the code points 256, 257, ... in byte order.
constexpr bool keeps_code_point(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr int kMaxCodePoint = 256 + 68;

struct Alphabet {
  std::array<std::string, 256> chars;        // byte -> UTF-8 of its character
  std::array<int16_t, kMaxCodePoint> bytes;  // code point -> byte, -1 when none
};

std::string utf8_of(uint32_t cp) {
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

const Alphabet& alphabet() {
  static const Alphabet table = [] {
    Alphabet a;
    a.bytes.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      int cp = keeps_code_point(b) ? b : next++;
      a.chars[b] = utf8_of(static_cast<uint32_t>(cp));
      a.bytes[cp] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return table;
}

}  // namespace

std::string_view byte_level_char(uint8_t byte) { return alphabet().chars[byte]; }

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  const auto& bytes = alphabet().bytes;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto c0 = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((c0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // 3- and 4-byte characters are all outside the alphabet
    }
    if (cp >= static_cast<uint32_t>(kMaxCodePoint) || bytes[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(bytes[cp]));
  }
  return out;
}

}  // namespace titan::components::tokenizer
