#include "tokenizer/bpe_model.h"

#include <algorithm>

namespace spark {

void PairMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  if (cap <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(cap, Slot{kEmpty, {0, 0}});
  mask_ = cap - 1;
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != kEmpty) assign(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.entry);
  }
}

void PairMap::grow() {
  reserve(std::max<size_t>(8, size_ * 2));
}

void PairMap::assign(int32_t a, int32_t b, Entry e) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(a, b);
  for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.entry = e;
      return;
    }
    if (s.key == kEmpty) {
      s = Slot{key, e};
      ++size_;
      return;
    }
  }
}

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, const std::vector<std::array<int32_t, 3>>& merges,
                   WordMap whole_words, BpeOptions options)
    : byte_ids_(byte_ids),
      whole_words_(std::move(whole_words)),
      options_(options),
      cache_(new Shard[kShards]) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    merges_.assign(merges[rank][0], merges[rank][1], {static_cast<int32_t>(rank), merges[rank][2]});
  }
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (options_.ignore_merges) {
    if (auto it = whole_words_.find(bytes); it != whole_words_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (bytes.size() == 1) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(bytes[0])];
    if (id >= 0) {
      out.push_back(id);
    } else if (options_.unk_id) {
      out.push_back(*options_.unk_id);
    }
    return;
  }
  if (bytes.size() > kMaxCachedWord) {
    merge_word(bytes, out);
    return;
  }
  Shard& shard = cache_[std::hash<std::string_view>{}(bytes) % kShards];
  {
    std::lock_guard lock(shard.mutex);
    if (auto it = shard.words.find(bytes); it != shard.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(bytes, out);
  std::lock_guard lock(shard.mutex);
  if (shard.words.size() < kMaxEntriesPerShard) {
    shard.words.emplace(std::string(bytes), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::merge_word(std::string_view bytes, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    // std heap is a max-heap: "less" means later in merge order (higher rank, then further right).
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();

  for (unsigned char b : bytes) {
    const int32_t id = byte_ids_[b];
    if (id < 0) {
      if (!options_.unk_id) continue;  // Hugging Face drops characters it cannot map without an unk
      if (options_.fuse_unk && !symbols.empty() && symbols.back().id == *options_.unk_id) continue;
      symbols.push_back({*options_.unk_id, 0, 0, true});
      continue;
    }
    symbols.push_back({id, 0, 0, true});
  }
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const auto* m = merges_.find(symbols[i].id, symbols[i + 1].id)) heap.push_back({m->rank, i, m->id});
  }
  std::make_heap(heap.begin(), heap.end());

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    const int32_t right_pos = cur.next;
    Symbol& right = symbols[right_pos];
    // A stale entry (either side merged since it was queued) no longer names the same merge.
    const auto* m = merges_.find(cur.id, right.id);
    if (m == nullptr || m->id != top.new_id) continue;

    cur.id = top.new_id;
    cur.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[right.next].prev = top.pos;

    if (cur.prev >= 0) {
      if (const auto* p = merges_.find(symbols[cur.prev].id, cur.id)) {
        heap.push_back({p->rank, cur.prev, p->id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (cur.next >= 0) {
      if (const auto* q = merges_.find(cur.id, symbols[cur.next].id)) {
        heap.push_back({q->rank, top.pos, q->id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  for (int32_t i = 0; i < n && i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace spark
