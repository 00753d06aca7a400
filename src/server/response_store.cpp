#include "server/response_store.h"

namespace spark {

namespace {

size_t json_bytes(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
}

}  // namespace

nlohmann::ordered_json StoredResponse::conversation() const {
  nlohmann::ordered_json items = input_items.is_array() ? input_items : nlohmann::ordered_json::array();
  if (response.contains("output") && response["output"].is_array()) {
    for (const auto& item : response["output"]) items.push_back(item);
  }
  return items;
}

bool ResponseStore::put(const std::string& id, StoredResponse entry) {
  if (!enabled()) return false;
  const size_t n = id.size() + json_bytes(entry.response) + json_bytes(entry.input_items);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (n > max_bytes_) return false;
  evict_to_fit(n);
  lru_.push_front(Entry{id, std::move(entry), n});
  index_[id] = lru_.begin();
  bytes_ += n;
  return true;
}

void ResponseStore::evict_to_fit(size_t incoming) {
  while (!lru_.empty() && (lru_.size() + 1 > max_count_ || bytes_ + incoming > max_bytes_)) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace spark
