// Stored responses for GET/DELETE /v1/responses/{id} and previous_response_id: an in-memory LRU bounded by
// count and by bytes (the JSON size of what is kept). Either bound 0 disables the store. Each entry keeps
// the response object and the whole input context it answered (the continued history included), so a
// continuation rebuilds the same conversation, and therefore the same prompt prefix, without a chain walk.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "util/lru_cache.h"

namespace spark {

struct StoredResponse {
  nlohmann::ordered_json response;     // the response object as answered
  nlohmann::ordered_json input_items;  // its input context, oldest first

  // What a continuation prepends to its input: the input context, then the response's output items.
  nlohmann::ordered_json conversation() const;
};

class ResponseStore {
 public:
  ResponseStore(size_t max_count, size_t max_bytes) : entries_(max_count, max_bytes) {}

  bool enabled() const { return entries_.max_count() > 0 && entries_.max_cost() > 0; }
  // Stores (or replaces) `id`, evicting the least recently used entries to fit. An entry larger than the
  // byte bound is not stored; returns whether it was.
  bool put(const std::string& id, StoredResponse entry);
  // The entry, now the most recently used; nullopt when absent or evicted.
  std::optional<StoredResponse> get(const std::string& id) { return entries_.get(id); }
  bool erase(const std::string& id) { return entries_.erase(id); }

  size_t size() const { return entries_.size(); }
  size_t bytes() const { return entries_.cost(); }

 private:
  util::LruCache<std::string, StoredResponse> entries_;
};

}  // namespace spark
