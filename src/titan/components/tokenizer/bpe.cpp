#include "titan/components/tokenizer/bpe.h"

#include <fmt/format.h>

#include <algorithm>

#include "titan/errors.h"

namespace titan::components::tokenizer {
namespace {

constexpr size_t kMaxCachedWord = 64;

// One symbol of the word being merged; symbols form a doubly linked list by index.
struct Symbol {
  int32_t id;
  int32_t prev;  // -1 at the start
  int32_t next;  // -1 at the end
  bool merged;   // absorbed into its left neighbour
};

// A pair (symbol `pos`, its next) that merges into `result` at `rank`.
struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

Bpe::Bpe(Vocab vocab, const std::vector<Merge>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options), cache_(options.cache_capacity) {
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    auto id = vocab_.find(std::string_view(&c, 1));
    if (!id) throw DataError(fmt::format("the vocabulary has no token for byte 0x{:02X}", b));
    byte_ids_[b] = *id;
  }
  merges_.reserve(merges.size());
  for (const Merge& m : merges) merges_[pair_key(m.left, m.right)] = {m.rank, m.result};
}

const Bpe::Target* Bpe::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void Bpe::encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (options_.ignore_merges) {
    if (auto id = vocab_.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWord;
  if (cacheable && cache_.lookup(word, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) cache_.insert(word, out.data() + first, out.data() + out.size());
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  const auto n = static_cast<int32_t>(word.size());
  symbols.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, false};
  }
  heap.clear();
  auto consider = [&](int32_t pos) {  // queue the pair starting at symbol `pos`, if it merges
    int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const Target* t = find_merge(symbols[pos].id, symbols[next].id)) {
      heap.push_back({t->rank, pos, t->result});
      std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.merged || left.next < 0) continue;
    const Target* t = find_merge(left.id, symbols[left.next].id);
    if (t == nullptr || t->result != top.result || t->rank != top.rank) continue;  // stale
    Symbol& right = symbols[left.next];
    right.merged = true;
    left.id = top.result;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace titan::components::tokenizer
