// Automata shared across grammars, by key, in a cache bounded by bytes: the least recently used table
// leaves first. A grammar holds its own reference, so leaving the cache never frees a table in use.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "grammar/grammar.h"

namespace spark::grammar {

// The heap bytes a table holds (its edge lists, exits and plain-text counts).
size_t dfa_table_bytes(const DfaTable& table);

class DfaTableCache {
 public:
  using Key = std::tuple<int, int, bool>;
  explicit DfaTableCache(size_t budget_bytes) : budget_(budget_bytes) {}
  // The table for `key`, now the most recently used; nullptr when absent.
  std::shared_ptr<const DfaTable> find(const Key& key);
  // Adds (or replaces) the table for `key`, then drops the least recently used past the budget. A table
  // larger than the whole budget is not kept.
  void insert(const Key& key, std::shared_ptr<const DfaTable> table);
  size_t bytes() const;
  size_t size() const;
  void set_budget(size_t budget_bytes);

 private:
  struct Entry {
    std::shared_ptr<const DfaTable> table;
    size_t bytes = 0;
    std::list<Key>::iterator pos;
  };
  void evict_locked();

  mutable std::mutex mutex_;
  std::list<Key> order_;  // most recently used first
  std::map<Key, Entry> entries_;
  size_t bytes_ = 0;
  size_t budget_;
};

}  // namespace spark::grammar
