#include "titan/components/data/utf8.h"

#include <cstdint>
#include <cstring>

namespace titan::components::data {
namespace {

// The well-formed sequence starting at s[i] (Table 3-7 of the Unicode standard: the allowed
// range of the second byte depends on the first; later bytes are 80..BF): its length, or 0 when
// it is ill-formed, with `subpart` set to the length of its maximal subpart (the longest prefix
// of a well-formed sequence, at least 1), which U+FFFD replaces as a whole.
size_t sequence_at(const uint8_t* s, size_t n, size_t i, size_t& subpart) {
  const uint8_t b = s[i];
  subpart = 1;
  if (b < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
    if (b == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;  // no overlong 4-byte forms
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // continuation byte without a lead, C0/C1 overlong leads, F5..FF
  }
  if (i + 1 >= n || s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    subpart = k;
    if (i + k >= n || (s[i + k] & 0xC0) != 0x80) return 0;
  }
  return len;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, eight bytes at a time.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    size_t subpart;
    const size_t len = sequence_at(s, n, i, subpart);
    if (len == 0) return i;
    i += len;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  std::string out;
  out.reserve(n);
  size_t i = 0;
  while (i < n) {
    size_t subpart;
    const size_t len = sequence_at(s, n, i, subpart);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += subpart;
    } else {
      out.append(bytes.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace titan::components::data
