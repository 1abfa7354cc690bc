#include "titan/components/tokenizer/pretokenizer.h"

namespace titan::components::tokenizer {
namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A stretch of a piece: [begin, end), and whether the pattern matched it.
struct Part {
  size_t begin;
  size_t end;
  bool matched;
};

// Cuts [0, size) into alternating matched / unmatched parts (HF's find_matches), flagging the
// parts the pattern matched (after `invert`).
void to_parts(const std::vector<Span>& matches, size_t size, bool invert,
              std::vector<Part>& parts) {
  parts.clear();
  size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > prev) parts.push_back({prev, begin, invert});
    parts.push_back({begin, end, !invert});
    prev = end;
  }
  if (prev < size) parts.push_back({prev, size, invert});
}

// Applies `behavior` to `parts`, appending the resulting pieces of `piece` to `out`.
void emit(std::string_view piece, const std::vector<Part>& parts, SplitBehavior behavior,
          std::vector<std::string_view>& out) {
  auto push = [&](size_t begin, size_t end) {
    if (end > begin) out.push_back(piece.substr(begin, end - begin));
  };
  size_t open = 0;  // start of the piece being grown (merging behaviours)
  bool growing = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    switch (behavior) {
      case SplitBehavior::kRemoved:
        if (!p.matched) push(p.begin, p.end);
        break;
      case SplitBehavior::kIsolated:
        push(p.begin, p.end);
        break;
      case SplitBehavior::kMergedWithPrevious:
        // A match closes the piece before it; anything else closes the previous piece first.
        if (p.matched && growing) {
          push(open, p.end);
          growing = false;
        } else {
          if (growing) push(open, p.begin);
          open = p.begin;
          growing = !p.matched;
          if (p.matched) push(p.begin, p.end);
        }
        break;
      case SplitBehavior::kMergedWithNext:
        // A match opens a piece that the following non-match completes.
        if (!p.matched && growing) {
          push(open, p.end);
          growing = false;
        } else {
          if (growing) push(open, p.begin);
          open = p.begin;
          growing = p.matched;
          if (!p.matched) push(p.begin, p.end);
        }
        break;
      case SplitBehavior::kContiguous:
        if (i + 1 == parts.size() || parts[i + 1].matched != p.matched) {
          push(open, p.end);
          open = p.end;
        }
        break;
    }
  }
  if (growing) push(open, parts.back().end);
}

}  // namespace

SplitPreTokenizer::SplitPreTokenizer(const std::string& pattern, bool literal,
                                     SplitBehavior behavior, bool invert)
    : regex_(pattern, literal), behavior_(behavior), invert_(invert) {}

void SplitPreTokenizer::apply(PreTokens& tokens) const {
  thread_local std::vector<Span> matches;
  thread_local std::vector<Part> parts;
  std::vector<std::string_view> out;
  out.reserve(tokens.pieces.size() * 2);
  for (std::string_view piece : tokens.pieces) {
    regex_.find_all(piece, matches);
    to_parts(matches, piece.size(), invert_, parts);
    emit(piece, parts, behavior_, out);
  }
  tokens.pieces = std::move(out);
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
    : add_prefix_space_(add_prefix_space),
      gpt2_split_(use_regex ? std::make_unique<SplitPreTokenizer>(kGpt2Pattern, false,
                                                                  SplitBehavior::kIsolated, false)
                            : nullptr) {}

void ByteLevelPreTokenizer::apply(PreTokens& tokens) const {
  if (add_prefix_space_) {
    for (std::string_view& piece : tokens.pieces) {
      if (!piece.empty() && piece.front() == ' ') continue;
      tokens.owned.push_back(" " + std::string(piece));
      piece = tokens.owned.back();
    }
  }
  if (gpt2_split_) gpt2_split_->apply(tokens);
}

SequencePreTokenizer::SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> stages)
    : stages_(std::move(stages)) {}

void SequencePreTokenizer::apply(PreTokens& tokens) const {
  for (const auto& stage : stages_) stage->apply(tokens);
}

}  // namespace titan::components::tokenizer
