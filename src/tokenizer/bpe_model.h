// The BPE model of a byte-level tokenizer: a word (one pre-tokenizer piece, as raw bytes) starts as
// one symbol per byte and adjacent pairs are merged lowest rank first (leftmost first among equal
// ranks), exactly like Hugging Face's word.rs, with a heap over a linked list of symbols so a word of n
// bytes costs O(n log n). Results are cached per word.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spark {

struct BpeOptions {
  std::optional<int32_t> unk_id;  // id for bytes missing from the vocabulary; dropped when unset
  bool fuse_unk = false;          // consecutive unknown bytes become one unk
  bool ignore_merges = false;     // a word that is itself in the vocabulary is taken whole
};

// Merge table keyed by the pair of ids: open addressing, because this lookup is the hot loop.
class PairMap {
 public:
  struct Entry {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n);
  // A pair listed twice keeps its last rank, as Hugging Face's HashMap collect does.
  void assign(int32_t a, int32_t b, Entry e);
  const Entry* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(a, b);
    for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.entry;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key;
    Entry entry;
  };
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void grow();
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

class BpeModel {
 public:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using WordMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  // `byte_ids[b]`: id of the single-byte token for byte b, or -1 when the vocabulary lacks it.
  // `merges`: {left id, right id, merged id} in rank order. `whole_words`: raw bytes -> id of every
  // vocabulary entry (only read with ignore_merges).
  BpeModel(std::array<int32_t, 256> byte_ids, const std::vector<std::array<int32_t, 3>>& merges,
           WordMap whole_words, BpeOptions options);

  // Appends the ids of one pre-tokenized piece (raw bytes). Thread-safe.
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

  size_t num_merges() const { return merges_.size(); }

 private:
  void merge_word(std::string_view bytes, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_;
  PairMap merges_;
  WordMap whole_words_;
  BpeOptions options_;

  // Word cache, sharded so concurrent encoders rarely meet on a lock. Words longer than
  // kMaxCachedWord are not cached (they are rare and would crowd out the rest).
  static constexpr size_t kShards = 32;
  static constexpr size_t kMaxCachedWord = 256;
  static constexpr size_t kMaxEntriesPerShard = 2048;  // 65536 words, a few MB at most
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
  };
  std::unique_ptr<Shard[]> cache_;
};

}  // namespace spark
