#include "grammar/table_cache.h"

namespace spark::grammar {

size_t dfa_table_bytes(const DfaTable& table) {
  size_t bytes = sizeof(DfaTable) + table.edges.capacity() * sizeof(table.edges[0]) +
                 (table.exit.capacity() + table.plain.capacity()) * sizeof(int32_t);
  for (const auto& edges : table.edges) bytes += edges.capacity() * sizeof(DfaTable::Edge);
  return bytes;
}

std::shared_ptr<const DfaTable> DfaTableCache::find(const Key& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.pos);
  return it->second.table;
}

void DfaTableCache::insert(const Key& key, std::shared_ptr<const DfaTable> table) {
  const size_t bytes = dfa_table_bytes(*table);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    order_.erase(it->second.pos);
    entries_.erase(it);
  }
  if (bytes > budget_) return;
  order_.push_front(key);
  entries_[key] = Entry{std::move(table), bytes, order_.begin()};
  bytes_ += bytes;
  evict_locked();
}

void DfaTableCache::evict_locked() {
  while (bytes_ > budget_ && !order_.empty()) {
    auto it = entries_.find(order_.back());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    order_.pop_back();
  }
}

size_t DfaTableCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

size_t DfaTableCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void DfaTableCache::set_budget(size_t budget_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  budget_ = budget_bytes;
  evict_locked();
}

}  // namespace spark::grammar
