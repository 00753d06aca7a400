#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace spark {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
}

struct HeapEntry {
  int64_t count;
  int32_t a;
  int32_t b;
  // Max-heap on count; among equal counts the pair of older tokens (smaller ids) wins.
  bool operator<(const HeapEntry& o) const { return std::tie(count, o.a, o.b) < std::tie(o.count, a, b); }
};

class Trainer {
 public:
  Trainer(const std::vector<std::pair<std::string, int64_t>>& words,
          const std::unordered_set<std::string>& forbidden)
      : forbidden_(forbidden) {
    for (int b = 0; b < 256; ++b) add_token(std::string(1, static_cast<char>(b)));
    // Sorted words make the word indices, and so everything below, independent of the input order.
    std::vector<std::pair<std::string, int64_t>> sorted(words);
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [w, count] : sorted) {
      if (w.size() < 2 || count <= 0) continue;
      std::vector<int32_t> syms;
      for (unsigned char c : w) syms.push_back(c);
      words_.push_back(std::move(syms));
      counts_.push_back(count);
    }
    for (size_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t key = pair_key(s[i], s[i + 1]);
        pair_count_[key] += counts_[w];
        where_[key].push_back(static_cast<int32_t>(w));
      }
    }
    for (const auto& [key, count] : pair_count_)
      heap_.push({count, int32_t(key >> 32), int32_t(uint32_t(key))});
    stamp_.assign(words_.size(), 0);
  }

  std::vector<BpeMerge> run(size_t new_tokens) {
    while (created_ < new_tokens && corpus_merge()) {
    }
    fill(new_tokens);
    return std::move(merges_);
  }

 private:
  int32_t add_token(const std::string& bytes) {
    auto [it, inserted] = index_.emplace(bytes, static_cast<int32_t>(tokens_.size()));
    if (inserted) tokens_.push_back(bytes);
    return it->second;
  }

  // One merge learned from the words; false when no pair is left.
  bool corpus_merge() {
    while (!heap_.empty()) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      const uint64_t key = pair_key(top.a, top.b);
      const int64_t current = pair_count_[key];
      if (current != top.count) {
        if (current > 0) heap_.push({current, top.a, top.b});  // stale entry: requeue at its real count
        continue;
      }
      if (current <= 0) return false;
      const std::string merged = tokens_[top.a] + tokens_[top.b];
      // A pair can come back when a later merge recreates an existing token; a second merge line for
      // it would only shadow the first one's rank.
      if (forbidden_.contains(merged) || !merged_pairs_.insert(key).second) {
        pair_count_[key] = -1;  // never again
        continue;
      }
      const size_t before = tokens_.size();
      const int32_t id = add_token(merged);
      if (tokens_.size() > before) ++created_;
      merges_.push_back({tokens_[top.a], tokens_[top.b]});
      apply(top.a, top.b, id, key);
      return true;
    }
    return false;
  }

  void apply(int32_t a, int32_t b, int32_t id, uint64_t key) {
    ++generation_;
    std::unordered_map<uint64_t, int64_t> delta;
    const std::vector<int32_t> affected = std::move(where_[key]);
    where_.erase(key);
    for (int32_t w : affected) {
      if (stamp_[w] == generation_) continue;  // listed twice
      stamp_[w] = generation_;
      std::vector<int32_t>& s = words_[w];
      std::vector<int32_t> merged;
      merged.reserve(s.size());
      bool changed = false;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          merged.push_back(id);
          ++i;
          changed = true;
        } else {
          merged.push_back(s[i]);
        }
      }
      if (!changed) continue;
      const int64_t c = counts_[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) delta[pair_key(s[i], s[i + 1])] -= c;
      for (size_t i = 0; i + 1 < merged.size(); ++i) {
        const uint64_t k = pair_key(merged[i], merged[i + 1]);
        delta[k] += c;
        where_[k].push_back(w);
      }
      s = std::move(merged);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& count = pair_count_[k];
      if (count < 0) continue;  // forbidden pair stays out
      count += d;
      if (d > 0) heap_.push({count, int32_t(k >> 32), int32_t(uint32_t(k))});
    }
    pair_count_[key] = 0;
  }

  // Filler merges once the words are exhausted: pairs (L[i], L[j]) walked diagonal by diagonal over
  // L = the learned tokens in creation order followed by the 256 bytes.
  void fill(size_t new_tokens) {
    if (created_ >= new_tokens) return;
    std::vector<int32_t> order;
    for (size_t t = 256; t < tokens_.size(); ++t) order.push_back(static_cast<int32_t>(t));
    for (int32_t t = 0; t < 256; ++t) order.push_back(t);
    const size_t n = order.size();
    for (size_t diag = 0; created_ < new_tokens; ++diag) {
      for (size_t i = 0; i <= diag && i < n && created_ < new_tokens; ++i) {
        const size_t j = diag - i;
        if (j >= n) continue;
        const std::string merged = tokens_[order[i]] + tokens_[order[j]];
        if (index_.contains(merged) || forbidden_.contains(merged)) continue;  // new tokens only
        add_token(merged);
        ++created_;
        merges_.push_back({tokens_[order[i]], tokens_[order[j]]});
      }
    }
  }

  const std::unordered_set<std::string>& forbidden_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<HeapEntry> heap_;
  std::unordered_set<uint64_t> merged_pairs_;
  std::vector<uint32_t> stamp_;
  uint32_t generation_ = 0;
  size_t created_ = 0;
  std::vector<BpeMerge> merges_;
};

}  // namespace

std::vector<BpeMerge> train_bpe(const std::vector<std::pair<std::string, int64_t>>& words, size_t new_tokens,
                                const std::unordered_set<std::string>& forbidden) {
  return Trainer(words, forbidden).run(new_tokens);
}

}  // namespace spark
