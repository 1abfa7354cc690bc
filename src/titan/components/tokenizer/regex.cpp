#include "titan/components/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "titan/errors.h"

namespace titan::components::tokenizer {
namespace {

// Match data and JIT stack of the calling thread, shared by all patterns (PCRE2 allows one
// match data block for any pattern; one ovector pair is all find_all reads).
struct ThreadScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}

// Unicode White_Space, which \s means in Oniguruma (HF tokenizers) and Rust regex (tiktoken).
// PCRE2's \s also matches U+180E MONGOLIAN VOWEL SEPARATOR, a format character since
// Unicode 6.3.
constexpr const char* kWhiteSpace =
    R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s (and \S outside character classes) spelled as Unicode White_Space.
std::string with_unicode_white_space(const std::string& pattern) {
  const std::string space = kWhiteSpace;
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c == '\\' && next == 's') {
      out += in_class ? space : "[" + space + "]";
      ++i;
    } else if (c == '\\' && next == 'S' && !in_class) {
      out += "[^" + space + "]";
      ++i;
    } else if (c == '\\' && next != '\0') {
      out += {c, next};
      ++i;
    } else if (c == '[' && in_class && next == ':') {  // POSIX class such as [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i, stop - i);
      i = stop - 1;
    } else if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (next == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // literal ]
    } else {
      if (c == ']') in_class = false;
      out += c;
    }
  }
  return out;
}

size_t next_char(std::string_view text, size_t i) {
  ++i;
  while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
  return i;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern, bool literal) : code_(std::make_unique<Code>()) {
  const uint32_t options =
      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE offset = 0;
  const std::string source = literal ? pattern : with_unicode_white_space(pattern);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options,
                              &error, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw DataError(fmt::format("cannot compile regex '{}': {} at offset {} of '{}'", pattern,
                                reinterpret_cast<const char*>(message), offset, source));
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  ThreadScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), start, 0, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw DataError(fmt::format("regex match failed at byte {}: {}", start,
                                  reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    out.emplace_back(ov[0], ov[1]);
    start = ov[1] > ov[0] ? ov[1] : next_char(text, ov[1]);
  }
}

}  // namespace titan::components::tokenizer
