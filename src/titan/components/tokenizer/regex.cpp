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
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (literal) options |= PCRE2_LITERAL;
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              options, &error, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw DataError(fmt::format("cannot compile regex '{}': {} at offset {}", pattern,
                                reinterpret_cast<const char*>(message), offset));
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
