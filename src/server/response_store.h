// Stored responses for GET/DELETE /v1/responses/{id} and previous_response_id: an in-memory LRU bounded by
// count and by bytes (the JSON size of what is kept). Either bound 0 disables the store. Each entry keeps
// the response object and the whole input context it answered (the continued history included), so a
// continuation rebuilds the same conversation, and therefore the same prompt prefix, without a chain walk.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace spark {

struct StoredResponse {
  nlohmann::ordered_json response;     // the response object as answered
  nlohmann::ordered_json input_items;  // its input context, oldest first

  // What a continuation prepends to its input: the input context, then the response's output items.
  nlohmann::ordered_json conversation() const;
};

class ResponseStore {
 public:
  ResponseStore(size_t max_count, size_t max_bytes) : max_count_(max_count), max_bytes_(max_bytes) {}

  bool enabled() const { return max_count_ > 0 && max_bytes_ > 0; }
  // Stores (or replaces) `id`, evicting the least recently used entries to fit. An entry larger than the
  // byte bound is not stored; returns whether it was.
  bool put(const std::string& id, StoredResponse entry);
  // The entry, now the most recently used; nullopt when absent or evicted.
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    size_t bytes;
  };
  void evict_to_fit(size_t incoming);

  size_t max_count_;
  size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace spark
