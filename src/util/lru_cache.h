// A thread-safe cache bounded by entry count and by total cost (bytes, as the owner measures them): the
// least recently used entries leave first. The process-wide caches a client can fill (grammars, shared
// automata, stored responses) all need both bounds, so they share this one.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace spark::util {

template <class Key, class Value>
class LruCache {
 public:
  LruCache(size_t max_count, size_t max_cost) : max_count_(max_count), max_cost_(max_cost) {}

  // The entry, now the most recently used; nullopt when absent.
  std::optional<Value> get(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Stores (or replaces) `key` as the most recently used, then drops the least recently used entries past
  // either bound. An entry costing more than the whole budget is not kept (a replaced one is gone all the
  // same, and nothing else leaves for it); returns whether it was kept.
  bool put(const Key& key, Value value, size_t cost) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) erase_locked(it);
    if (max_count_ == 0 || cost > max_cost_) return false;
    order_.push_front(Entry{key, std::move(value), cost});
    index_.emplace(key, order_.begin());
    cost_ += cost;
    evict_locked();
    return true;
  }

  bool erase(const Key& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    erase_locked(it);
    return true;
  }

  // Measures every entry again (for values that grow while cached, such as a grammar's mask caches), then
  // drops the least recently used past the bounds.
  void recost(const std::function<size_t(const Key&, const Value&)>& cost_of) {
    std::lock_guard<std::mutex> lock(mutex_);
    cost_ = 0;
    for (Entry& e : order_) cost_ += (e.cost = cost_of(e.key, e.value));
    evict_locked();
  }

  void set_limits(size_t max_count, size_t max_cost) {
    std::lock_guard<std::mutex> lock(mutex_);
    max_count_ = max_count;
    max_cost_ = max_cost;
    evict_locked();
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }
  size_t cost() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cost_;
  }
  size_t max_count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return max_count_;
  }
  size_t max_cost() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return max_cost_;
  }

 private:
  struct Entry {
    Key key;
    Value value;
    size_t cost;
  };
  using Order = std::list<Entry>;  // most recently used first

  void erase_locked(typename std::map<Key, typename Order::iterator>::iterator it) {
    cost_ -= it->second->cost;
    order_.erase(it->second);
    index_.erase(it);
  }
  void evict_locked() {
    while (!order_.empty() && (order_.size() > max_count_ || cost_ > max_cost_))
      erase_locked(index_.find(order_.back().key));
  }

  mutable std::mutex mutex_;
  size_t max_count_, max_cost_;
  Order order_;
  std::map<Key, typename Order::iterator> index_;
  size_t cost_ = 0;
};

}  // namespace spark::util
