#include "titan/components/tokenizer/added_tokens.h"

namespace titan::components::tokenizer {
namespace {

uint64_t edge_key(int32_t node, unsigned char byte) {
  return (static_cast<uint64_t>(node) << 8) | byte;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : token_of_node_{-1} {
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    first_bytes_[static_cast<unsigned char>(token.content[0])] = true;
    int32_t node = 0;
    for (char c : token.content) {
      auto [it, inserted] = edges_.try_emplace(edge_key(node, static_cast<unsigned char>(c)),
                                               static_cast<int32_t>(token_of_node_.size()));
      if (inserted) token_of_node_.push_back(-1);
      node = it->second;
    }
    token_of_node_[node] = token.id;
  }
}

std::pair<size_t, int32_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges_.find(edge_key(node, static_cast<unsigned char>(text[i])));
    if (it == edges_.end()) break;
    node = it->second;
    if (token_of_node_[node] >= 0) best = {i + 1 - pos, token_of_node_[node]};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (!first_bytes_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [length, id] = longest_at(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    if (pos > plain_start) out.push_back({text.substr(plain_start, pos - plain_start), -1});
    out.push_back({text.substr(pos, length), id});
    pos += length;
    plain_start = pos;
  }
  if (text.size() > plain_start) out.push_back({text.substr(plain_start), -1});
}

}  // namespace titan::components::tokenizer
