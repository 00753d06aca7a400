// Where each name sits in a vector of (name, value) pairs, for the insertion-ordered maps built from
// requests (JSON objects, Jinja dicts and scopes). Such maps are usually small, where a scan beats hashing,
// but a request can bring 200 000 names; a scan per name made one such request cost 35-46 s of a core, so
// past kScanNames the positions are hashed.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace spark::util {

class NameIndex {
 public:
  static constexpr size_t kScanNames = 16;

  // The value of `name` in `pairs`, or nullptr.
  template <class Pairs>
  auto find(Pairs& pairs, std::string_view name) const -> decltype(&pairs.front().second) {
    if (!pos_.empty()) {
      const auto it = pos_.find(name);
      return it == pos_.end() ? nullptr : &pairs[it->second].second;
    }
    for (auto& entry : pairs) {
      if (entry.first == name) return &entry.second;
    }
    return nullptr;
  }

  // Replaces the value of `name`, or appends it (a repeated JSON key keeps its first place and its last
  // value, as a Python dict and nlohmann's parser do). Returns the value's slot.
  template <class Pairs, class V>
  auto& set(Pairs& pairs, std::string name, V&& value) {
    if (auto* slot = find(pairs, name)) return *slot = std::forward<V>(value);
    pairs.emplace_back(std::move(name), std::forward<V>(value));
    // Indexed after the append, so a failed allocation leaves no position past the end.
    if (!pos_.empty()) {
      pos_.emplace(pairs.back().first, pairs.size() - 1);
    } else if (pairs.size() > kScanNames) {
      for (size_t i = 0; i < pairs.size(); ++i) pos_.emplace(pairs[i].first, i);
    }
    return pairs.back().second;
  }

 private:
  struct Hash {
    using is_transparent = void;  // find() by string_view without a string
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, Hash, std::equal_to<>> pos_;
};

}  // namespace spark::util
