#include "titan/components/tokenizer/vocab.h"

#include <functional>

namespace titan::components::tokenizer {

size_t Vocab::slot_of(std::string_view bytes) const {
  const size_t mask = table_.size() - 1;
  size_t slot = std::hash<std::string_view>{}(bytes)&mask;
  while (table_[slot] >= 0 && view(spans_[table_[slot]]) != bytes) slot = (slot + 1) & mask;
  return slot;
}

void Vocab::grow_table() {
  std::vector<int32_t> old = std::move(table_);
  table_.assign(old.empty() ? 1024 : old.size() * 2, -1);
  for (int32_t id : old) {
    if (id >= 0) table_[slot_of(view(spans_[id]))] = id;
  }
}

bool Vocab::add(int32_t id, std::string_view bytes, bool encodable) {
  if (id < 0 || contains(id)) return false;
  if (encodable) {
    if ((encodable_ + 1) * 2 > table_.size()) grow_table();
    if (table_[slot_of(bytes)] >= 0) return false;
  }
  if (static_cast<size_t>(id) >= spans_.size()) spans_.resize(static_cast<size_t>(id) + 1);
  spans_[id] = {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(bytes.size()), true};
  arena_.append(bytes);
  if (encodable) {
    table_[slot_of(bytes)] = id;
    ++encodable_;
  }
  ++count_;
  return true;
}

std::optional<int32_t> Vocab::find(std::string_view bytes) const {
  if (table_.empty()) return std::nullopt;
  int32_t id = table_[slot_of(bytes)];
  if (id < 0) return std::nullopt;
  return id;
}

bool Vocab::contains(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < spans_.size() && spans_[id].present;
}

std::string_view Vocab::bytes(int32_t id) const { return view(spans_[id]); }

}  // namespace titan::components::tokenizer
