#include "model/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "spark/error.h"
#include "util/thread_pool.h"

namespace spark {

KvDtype parse_kv_cache_dtype(const std::string& name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBf16;
  if (name == "fp8" || name == "fp8_e4m3") return KvDtype::kFp8;
  throw Error("--kv-cache-dtype must be f32, bf16 or fp8, not '" + name + "'");
}

KvPagePool::KvPagePool(const ModelConfig& config, int block_size, int64_t budget_bytes, bool prefault,
                       KvDtype dtype)
    : block_size_(block_size),
      kv_dim_(config.kv_dim()),
      head_dim_(config.head_dim),
      num_full_layers_(config.num_full_layers()),
      num_sliding_layers_(config.num_sliding_layers()),
      ring_capacity_(config.sliding_window - 1),
      dtype_(dtype) {
  if (block_size <= 0) throw Error("KV block size must be positive");
  // A page is one block of the full layers; a model without full layers still pages its rings.
  page_elements_ = 2 * static_cast<int64_t>(std::max(1, num_full_layers_)) * block_size * kv_dim_;
  // In 128 bits: a checkpoint's sliding_window of 2^30 wrapped the page count of an int (a SIGSEGV).
  const __int128 ring_elements =
      static_cast<__int128>(2) * num_sliding_layers_ * ring_capacity_ * static_cast<__int128>(kv_dim_);
  const __int128 ring_pages = (ring_elements + page_elements_ - 1) / page_elements_;
  if (ring_pages > std::numeric_limits<int>::max()) {
    throw Error("sliding_window " + std::to_string(config.sliding_window) +
                " needs more KV pages per sequence than this server can index");
  }
  ring_pages_ = static_cast<int>(ring_pages);
  // A sliding block puts max(1, full layers) sliding layers in each page, in the full-layer layout.
  const int per_page = std::max(1, num_full_layers_);
  slide_pages_per_block_ = (num_sliding_layers_ + per_page - 1) / per_page;
  if (budget_bytes > 0) {
    max_pages_ = budget_bytes / page_bytes();
    if (max_pages_ == 0) {
      throw Error("KV cache budget of " + std::to_string(budget_bytes) + " bytes is smaller than one page (" +
                  std::to_string(page_bytes()) + " bytes)");
    }
    // An anonymous mapping reads as zeros and commits memory page by page as it is written.
    arena_bytes_ = static_cast<size_t>(max_pages_ * page_bytes());
    void* mem = ::mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
      throw Error("cannot reserve a KV cache of " + std::to_string(arena_bytes_) +
                  " bytes: " + std::strerror(errno));
    }
    arena_ = static_cast<char*>(mem);
    // Decode attention streams every full-layer block of a long context per token; with 4 KiB pages that
    // is a TLB miss every two head rows. Huge pages where the kernel allows them (advice only: failure
    // or THP "never" leave 4 KiB pages).
    ::madvise(mem, arena_bytes_, MADV_HUGEPAGE);
    if (prefault) std::memset(arena_, 0, arena_bytes_);
    for (int64_t p = 0; p < max_pages_; ++p) pages_.push_back(arena_ + p * page_bytes());
    refs_.assign(pages_.size(), 0);
    cached_.assign(pages_.size(), 0);
    for (int64_t p = max_pages_ - 1; p >= 0; --p) free_list_.push_back(static_cast<int>(p));
  }
}

KvPagePool::~KvPagePool() {
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
}

int KvPagePool::allocate() {
  if (free_list_.empty()) {
    if (bounded()) return -1;
    chunks_.emplace_back(new float[static_cast<size_t>((page_bytes() + 3) / 4)]);
    pages_.push_back(reinterpret_cast<char*>(chunks_.back().get()));
    refs_.push_back(0);
    cached_.push_back(0);
    free_list_.push_back(static_cast<int>(pages_.size() - 1));
  }
  int p = free_list_.back();
  free_list_.pop_back();
  refs_[static_cast<size_t>(p)] = 1;
  ++in_use_;
  return p;
}

void KvPagePool::release(int page) {
  int& r = refs_[static_cast<size_t>(page)];
  if (r <= 0) throw Error("KV page released more often than referenced");
  if (--r == 1 && cached_[static_cast<size_t>(page)]) ++cached_sole_;
  if (r == 0) {
    if (cached_[static_cast<size_t>(page)]) throw Error("KV page freed while the prefix cache marks it");
    free_list_.push_back(page);
    --in_use_;
  }
}

void KvPagePool::set_cached(int page, bool cached) {
  uint8_t& c = cached_[static_cast<size_t>(page)];
  if (static_cast<bool>(c) == cached) return;
  if (refs_[static_cast<size_t>(page)] == 1) cached_sole_ += cached ? 1 : -1;
  c = cached ? 1 : 0;
}

void* KvPagePool::slide_entry(const int* pages, int sliding_layer, int64_t pos, int kv) {
  const int per_page = std::max(1, num_full_layers_);
  return element(
      pages[sliding_layer / per_page],
      ((static_cast<int64_t>(sliding_layer % per_page) * 2 + kv) * block_size_ + pos % block_size_) *
          kv_dim_);
}

SequenceKv::SequenceKv(KvPagePool& pool) : pool_(pool) {}

SequenceKv::~SequenceKv() {
  clear();
}

int64_t SequenceKv::pages_needed(int64_t total_tokens) const {
  const int64_t blocks = (total_tokens + pool_.block_size() - 1) / pool_.block_size();
  int64_t need = std::max<int64_t>(0, blocks - static_cast<int64_t>(blocks_.size()));
  if (ring_.empty()) need += pool_.ring_pages();
  return need;
}

bool SequenceKv::ensure_ring() {
  if (!ring_.empty() || pool_.ring_pages() == 0) return true;
  for (int i = 0; i < pool_.ring_pages(); ++i) {
    int p = pool_.allocate();
    if (p < 0) {
      for (int q : ring_) pool_.release(q);
      ring_.clear();
      return false;
    }
    ring_.push_back(p);
  }
  return true;
}

bool SequenceKv::reserve(int64_t total_tokens) {
  const bool had_ring = !ring_.empty();
  if (!ensure_ring()) return false;
  const int64_t need = (total_tokens + pool_.block_size() - 1) / pool_.block_size();
  const size_t before = blocks_.size();
  while (static_cast<int64_t>(blocks_.size()) < need) {
    int b = pool_.allocate();
    if (b < 0) {
      while (blocks_.size() > before) {
        pool_.release(blocks_.back());
        blocks_.pop_back();
      }
      if (!had_ring) {
        for (int q : ring_) pool_.release(q);
        ring_.clear();
      }
      return false;
    }
    blocks_.push_back(b);
  }
  return true;
}

void SequenceKv::clear() {
  for (int b : blocks_) pool_.release(b);
  for (int p : ring_) pool_.release(p);
  for (const auto& c : capture_) {
    for (int p : c) pool_.release(p);
  }
  blocks_.clear();
  ring_.clear();
  capture_.clear();
  num_tokens_ = 0;
}

bool SequenceKv::adopt_prefix(const std::vector<int>& blocks, const std::vector<const int*>& slide,
                              ThreadPool* threads) {
  if (num_tokens_ != 0 || !blocks_.empty()) throw Error("adopt_prefix needs an empty sequence");
  const int64_t bs = pool_.block_size();
  const int64_t n = static_cast<int64_t>(blocks.size()) * bs;
  const int64_t cap = pool_.ring_capacity();
  const int64_t first = std::max<int64_t>(0, n - cap);
  if (static_cast<int64_t>(slide.size()) < static_cast<int64_t>(blocks.size()))
    throw Error("adopt_prefix: no sliding blocks given");
  for (int64_t b = first / bs; b < static_cast<int64_t>(blocks.size()) && pool_.num_sliding_layers() > 0;
       ++b) {
    if (slide[static_cast<size_t>(b)] == nullptr)
      throw Error("adopt_prefix: a sliding block inside the window is missing");
  }
  if (!ensure_ring()) return false;
  for (int b : blocks) {
    pool_.add_ref(b);
    blocks_.push_back(b);
  }
  // One task per (sliding layer, K or V): the tasks write disjoint ring entries.
  const size_t bytes = static_cast<size_t>(pool_.kv_dim()) * static_cast<size_t>(pool_.element_bytes());
  auto fill = [&](size_t begin, size_t end) {
    for (size_t task = begin; task < end; ++task) {
      const int l = static_cast<int>(task / 2), kv = static_cast<int>(task % 2);
      for (int64_t pos = first; pos < n; ++pos) {
        std::memcpy(ring_entry(l, pos, kv),
                    pool_.slide_entry(slide[static_cast<size_t>(pos / bs)], l, pos, kv), bytes);
      }
    }
  };
  const size_t tasks = 2 * static_cast<size_t>(pool_.num_sliding_layers());
  if (threads != nullptr && threads->size() > 1) {
    threads->parallel_for(tasks, 1, fill);
  } else {
    fill(0, tasks);
  }
  num_tokens_ = n;
  return true;
}

void SequenceKv::set_capture(int64_t block, std::vector<int> pages) {
  if (static_cast<int64_t>(capture_.size()) <= block) capture_.resize(static_cast<size_t>(block) + 1);
  for (int p : capture_[static_cast<size_t>(block)]) pool_.release(p);
  capture_[static_cast<size_t>(block)] = std::move(pages);
}

std::vector<int> SequenceKv::take_capture(int64_t block) {
  if (!capturing(block)) return {};
  return std::exchange(capture_[static_cast<size_t>(block)], {});
}

void* SequenceKv::capture_entry(int sliding_layer, int64_t pos, int kv) {
  const int64_t block = pos / pool_.block_size();
  if (!capturing(block)) return nullptr;
  return pool_.slide_entry(capture_[static_cast<size_t>(block)].data(), sliding_layer, pos, kv);
}

int64_t SequenceKv::pages_held() const {
  int64_t n = static_cast<int64_t>(blocks_.size() + ring_.size());
  for (const auto& c : capture_) n += static_cast<int64_t>(c.size());
  return n;
}

int64_t SequenceKv::ring_bytes() const {
  if (ring_.empty()) return 0;
  return static_cast<int64_t>(pool_.num_sliding_layers()) * pool_.ring_capacity() *
         pool_.bytes_per_token_per_layer();
}

void* SequenceKv::full_entry(int full_layer, int64_t pos, int kv) {
  const int bs = pool_.block_size();
  return pool_.element(blocks_[static_cast<size_t>(pos / bs)],
                       (static_cast<int64_t>(full_layer) * 2 + kv) * bs * pool_.kv_dim() +
                           (pos % bs) * pool_.full_row_stride());
}

void* SequenceKv::ring_entry(int sliding_layer, int64_t pos, int kv) {
  // Entry index in the ring's virtual layout [sliding layer][K, V][window - 1], spread over pages.
  const int64_t cap = pool_.ring_capacity();
  const int64_t entry = (static_cast<int64_t>(sliding_layer) * 2 + kv) * cap + pos % cap;
  const int64_t per_page = pool_.page_elements() / pool_.kv_dim();
  return pool_.element(ring_[static_cast<size_t>(entry / per_page)], (entry % per_page) * pool_.kv_dim());
}

}  // namespace spark
