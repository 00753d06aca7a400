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
  const size_t bytes = id.size() + json_bytes(entry.response) + json_bytes(entry.input_items);
  return entries_.put(id, std::move(entry), bytes);
}

}  // namespace spark
