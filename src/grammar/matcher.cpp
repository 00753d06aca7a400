#include "grammar/matcher.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <exception>
#include <shared_mutex>
#include <unordered_set>

#include "spark/error.h"

namespace spark::grammar {

namespace {

// Depth-first numbering falls out of inserting the tokens in byte order.
TokenTrie build_trie(const std::vector<std::string>& bytes, std::vector<int32_t> ids) {
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[a] < bytes[b]; });
  struct Build {
    uint32_t parent;
    uint8_t byte, depth;
    std::vector<int32_t> tokens;
  };
  std::vector<Build> build{{0, 0, 0, {}}};
  std::vector<uint32_t> path{0};
  std::string_view previous;
  for (int32_t id : ids) {
    const std::string_view text = bytes[static_cast<size_t>(id)];
    if (text.size() > 255) throw Error("token " + std::to_string(id) + " is longer than 255 bytes");
    size_t common = 0;
    while (common < text.size() && common < previous.size() && text[common] == previous[common]) ++common;
    path.resize(common + 1);
    for (size_t i = common; i < text.size(); ++i) {
      build.push_back({path.back(), static_cast<uint8_t>(text[i]), static_cast<uint8_t>(i + 1), {}});
      path.push_back(static_cast<uint32_t>(build.size() - 1));
    }
    build[path.back()].tokens.push_back(id);
    previous = text;
  }
  TokenTrie t;
  t.nodes.resize(build.size());
  std::vector<std::vector<uint32_t>> kids(build.size());
  for (uint32_t n = 1; n < build.size(); ++n) kids[build[n].parent].push_back(n);
  for (uint32_t n = 0; n < build.size(); ++n) {
    TokenTrie::Node& node = t.nodes[n];
    node.parent = build[n].parent;
    node.byte = build[n].byte;
    node.depth = build[n].depth;
    node.edges_begin = static_cast<uint32_t>(t.children.size());
    t.children.insert(t.children.end(), kids[n].begin(), kids[n].end());
    node.edges_end = static_cast<uint32_t>(t.children.size());
    node.tokens_begin = static_cast<uint32_t>(t.tokens.size());
    t.tokens.insert(t.tokens.end(), build[n].tokens.begin(), build[n].tokens.end());
    node.tokens_end = static_cast<uint32_t>(t.tokens.size());
    node.subtree_end = n + 1;
  }
  for (uint32_t n = static_cast<uint32_t>(build.size()); n-- > 1;) {
    TokenTrie::Node& p = t.nodes[build[n].parent];
    p.subtree_end = std::max(p.subtree_end, t.nodes[n].subtree_end);
  }
  return t;
}

// Plain text's first bytes, the one table of them: per byte, the length of the character it starts (0 for
// none: a control byte, `"`, `\`, a continuation byte, a byte no well-formed UTF-8 holds) and the range of
// the byte after it (a lead's second byte rules out overlong forms, surrogates and code points past
// U+10FFFF).
struct PlainStart {
  uint8_t len, lo, hi;
};
constexpr std::array<PlainStart, 256> kPlainStart = [] {
  std::array<PlainStart, 256> t{};
  for (int b = 0x20; b < 0x80; ++b) t[b] = {1, 0, 0};
  t['"'] = t['\\'] = {0, 0, 0};
  for (int b = 0xC2; b <= 0xF4; ++b) {
    const auto len = static_cast<uint8_t>(b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4);
    t[b] = {len,
            static_cast<uint8_t>(b == 0xE0   ? 0xA0
                                 : b == 0xF0 ? 0x90
                                             : 0x80),
            static_cast<uint8_t>(b == 0xED   ? 0x9F
                                 : b == 0xF4 ? 0x8F
                                             : 0xBF)};
  }
  return t;
}();
// Per byte b, how many bytes below b start plain text: a range [lo, hi] holds one when [lo] and [hi + 1]
// differ.
constexpr std::array<uint16_t, 257> kPlainStartsBelow = [] {
  std::array<uint16_t, 257> t{};
  for (int b = 0; b < 256; ++b) t[b + 1] = static_cast<uint16_t>(t[b] + (kPlainStart[b].len ? 1 : 0));
  return t;
}();
bool starts_plain_in(uint8_t lo, uint8_t hi) {
  return kPlainStartsBelow[hi + 1u] != kPlainStartsBelow[lo];
}

// Set bits of a mask word. std::popcount is a libgcc call per word on the baseline x86-64 target (no
// POPCNT instruction), a few microseconds per 131k-token mask; this inlines and vectorizes.
inline size_t bits_set(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555ULL;
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<size_t>((x * 0x0101010101010101ULL) >> 56);
}

// Characters of plain text (JSON string characters written raw, well-formed UTF-8), or -1. A token may end
// inside a character (byte-level tokens split them): a well-formed start of one counts as a character, as
// the string needs room for it.
int32_t count_plain_chars(std::string_view s) {
  int32_t chars = 0;
  for (size_t i = 0; i < s.size();) {
    const PlainStart& p = kPlainStart[static_cast<uint8_t>(s[i])];
    if (p.len == 0) return -1;
    ++chars;
    for (size_t k = 1; k < p.len; ++k) {
      if (i + k >= s.size()) return chars;  // a well-formed start of a character ends the token
      const auto c = static_cast<uint8_t>(s[i + k]);
      if (c < (k == 1 ? p.lo : 0x80) || c > (k == 1 ? p.hi : 0xBF)) return -1;
    }
    i += p.len;
  }
  return chars;
}

}  // namespace

TokenVocab::TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(token_bytes)), end_ids_(std::move(end_ids)) {
  for (int32_t id : end_ids_) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) throw Error("end token id out of the vocabulary");
  }
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  for (size_t id = bytes_.size(); id-- > 0;) {
    if (bytes_[id].size() == 1) byte_token_[static_cast<uint8_t>(bytes_[id][0])] = static_cast<int32_t>(id);
  }
  std::vector<int32_t> all, other;
  plain_chars_.assign(bytes_.size(), -1);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id].empty() &&
        std::find(end_ids_.begin(), end_ids_.end(), static_cast<int32_t>(id)) == end_ids_.end()) {
      all.push_back(static_cast<int32_t>(id));
      plain_chars_[id] = count_plain_chars(bytes_[id]);
      if (plain_chars_[id] < 0) other.push_back(static_cast<int32_t>(id));
      max_plain_chars_ = std::max(max_plain_chars_, plain_chars_[id]);
    }
  }
  trie_ = build_trie(bytes_, std::move(all));
  other_trie_ = build_trie(bytes_, std::move(other));
  // Per node: whether its bytes are plain text on a character boundary (a path ending inside a character
  // turns ill-formed with one more ASCII byte), and the plain-text tokens in depth-first order.
  const size_t n = trie_.nodes.size();
  plain_path_.assign(n, 0);
  plain_before_.assign(n + 1, 0);
  std::string path;
  for (uint32_t i = 0; i < n; ++i) {
    const Node& node = trie_.nodes[i];
    if (i > 0) {
      path.resize(node.depth - 1u);
      path.push_back(static_cast<char>(node.byte));
      const int32_t chars = count_plain_chars(path);
      plain_path_[i] = chars >= 0 && count_plain_chars(path + "a") == chars + 1;
    } else {
      plain_path_[i] = 1;
    }
    for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
      if (plain_chars_[static_cast<size_t>(trie_.tokens[k])] >= 0) plain_dfs_.push_back(trie_.tokens[k]);
    }
    plain_before_[i + 1] = static_cast<uint32_t>(plain_dfs_.size());
  }
  full_to_other_.assign(n, kNoNode);
  other_to_full_.assign(other_trie_.nodes.size(), 0);
  for (uint32_t o = 1; o < other_trie_.nodes.size(); ++o) {
    const Node& on = other_trie_.nodes[o];
    const Node& parent = trie_.nodes[other_to_full_[on.parent]];
    for (uint32_t e = parent.edges_begin; e < parent.edges_end; ++e) {
      if (trie_.nodes[trie_.children[e]].byte == on.byte) {
        other_to_full_[o] = trie_.children[e];
        break;
      }
    }
    full_to_other_[other_to_full_[o]] = o;
  }
  full_to_other_[0] = 0;
  plain_from_root_.assign((bytes_.size() + 63) / 64, 0);
  for (uint32_t e = trie_.nodes[0].edges_begin; e < trie_.nodes[0].edges_end; ++e) {
    const uint32_t c = trie_.children[e];
    if (!plain_path(c) && kPlainStart[trie_.nodes[c].byte].len < 2) continue;
    for (const int32_t id : plain_below(c))
      plain_from_root_[static_cast<uint32_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
}

std::shared_ptr<const std::vector<uint64_t>> TokenVocab::plain_upto(int32_t chars) const {
  chars = std::min(chars, max_plain_chars_);
  std::lock_guard<std::mutex> lock(shared_mutex_);
  auto& slot = plain_upto_[chars];
  if (!slot) {
    auto bits = std::make_shared<std::vector<uint64_t>>((bytes_.size() + 63) / 64, 0);
    for (size_t id = 0; id < bytes_.size(); ++id) {
      if (plain_chars_[id] >= 0 && plain_chars_[id] <= chars) (*bits)[id >> 6] |= uint64_t{1} << (id & 63);
    }
    slot = std::move(bits);
  }
  return slot;
}

void WorkMeter::over() const {
  throw RequestError("the grammar is too costly to enforce: the next token would take more than " +
                     std::to_string(limit) + " automaton steps");
}

namespace {

// Frames one step may push: a deeper chain of calls that read nothing is unbounded left recursion.
constexpr uint32_t kMaxPushedFrames = 256;

// One byte step of a head set: closures after each head's byte edge, with calls pushed as frames and rule
// ends popped. With `opaque_bottom`, frame 0 stands for an unknown stack: a return from it is only noted.
struct Stepper {
  const Grammar& g;
  std::vector<Frame>& frames;
  std::vector<Head>& out;
  size_t out_begin;
  size_t frames_begin;
  bool opaque_bottom;
  bool accept = false;
  bool popped = false;
  WorkMeter* meter = nullptr;

  // Past a few, hash indexes of the heads in `out` and of the (state, frame) pairs expanded already: a
  // byte step of many heads (a pattern of many `.*`: each loop's closure holds the loops after it) cost
  // heads^2 closure entries times a linear scan of the heads.
  static constexpr size_t kIndexFrom = 16;
  std::unordered_set<uint64_t> in_out{}, expanded{};
  std::vector<uint64_t> expanded_few{};
  std::vector<uint32_t> pushed_depth{};  // per frame pushed in this step: frames pushed in its chain
  struct Pending {
    uint32_t state, frame, next;  // next: the entry of the state's closure to read next
  };
  std::vector<Pending> pending{};

  static uint64_t key(uint32_t state, uint32_t frame) { return (uint64_t{state} << 32) | frame; }

  void add_head(uint32_t s, uint32_t f) {
    const size_t n = out.size() - out_begin;
    if (n >= kIndexFrom) {
      if (in_out.insert(key(s, f)).second) out.push_back({s, f});
      return;
    }
    for (size_t i = out_begin; i < out.size(); ++i) {
      if (out[i].state == s && out[i].frame == f) return;
    }
    out.push_back({s, f});
    if (n + 1 == kIndexFrom) {
      for (size_t i = out_begin; i < out.size(); ++i) in_out.insert(key(out[i].state, out[i].frame));
    }
  }

  // Whether (t, f) is expanded for the first time in this step. What an expansion adds depends on nothing
  // else (the frame fixes the stack and the frames pushed above the step's start), so a second adds nothing.
  bool first_expansion(uint32_t t, uint32_t f) {
    const uint64_t k = key(t, f);
    if (!expanded.empty()) return expanded.insert(k).second;
    if (std::find(expanded_few.begin(), expanded_few.end(), k) != expanded_few.end()) return false;
    expanded_few.push_back(k);
    if (expanded_few.size() > kIndexFrom) expanded.insert(expanded_few.begin(), expanded_few.end());
    return true;
  }

  uint32_t depth_of(uint32_t f) const { return f < frames_begin ? 0 : pushed_depth[f - frames_begin]; }

  uint32_t push_frame(uint32_t ret, uint32_t parent) {
    for (size_t i = frames_begin; i < frames.size(); ++i) {
      if (frames[i].ret == ret && frames[i].parent == parent) return static_cast<uint32_t>(i);
    }
    frames.push_back({ret, parent});
    pushed_depth.push_back(depth_of(parent) + 1);
    return static_cast<uint32_t>(frames.size() - 1);
  }

  void enter(uint32_t t, uint32_t f) {
    if (!first_expansion(t, f)) return;
    const Grammar::State& ts = g.states[t];
    if (meter) meter->charge(1 + ts.closure_end - ts.closure_begin);
    pending.push_back({t, f, ts.closure_begin});
  }

  // Adds the heads that state t under frame f reaches without reading a byte: through its closure, calls
  // (a frame pushed unless it is a tail call) and rule ends (a frame popped). Depth first, with an explicit
  // stack: a chain of calls that read nothing is as long as the grammar makes it (an object of 2 000
  // optional properties skips each by calling the next; a recursion cut at 256 calls refused "{}").
  void expand(uint32_t t, uint32_t f) {
    enter(t, f);
    while (!pending.empty()) {
      Pending& p = pending.back();
      if (p.next == g.states[p.state].closure_end) {
        pending.pop_back();
        continue;
      }
      const uint32_t s = g.closure[p.next++];
      const uint32_t frame = p.frame;  // enter() may move `p`
      const Grammar::State& st = g.states[s];
      if (st.edges_end > st.edges_begin) add_head(s, frame);
      if (st.call_rule >= 0) {
        const uint32_t start = g.rule_start[static_cast<size_t>(st.call_rule)];
        if (st.tail_call) {
          enter(start, frame);
        } else if (depth_of(frame) < kMaxPushedFrames) {
          enter(start, push_frame(st.call_next, frame));
        }
      }
      if (st.final) {
        if (frame == 0) {
          (opaque_bottom ? popped : accept) = true;
        } else {
          const Frame fr = frames[frame];
          enter(fr.ret, fr.parent);
        }
      }
    }
  }
};

// Frames reachable from the heads, renumbered in order (a parent always precedes its children).
void collect_frames(std::vector<Head>& heads, std::vector<Frame>& frames) {
  std::vector<uint32_t> remap(frames.size(), UINT32_MAX);
  remap[0] = 0;
  for (const Head& h : heads) {
    for (uint32_t f = h.frame; f != 0 && remap[f] == UINT32_MAX; f = frames[f].parent) remap[f] = 1;
  }
  std::vector<Frame> kept{frames[0]};
  for (size_t i = 1; i < frames.size(); ++i) {
    if (remap[i] == UINT32_MAX) continue;
    remap[i] = static_cast<uint32_t>(kept.size());
    kept.push_back({frames[i].ret, remap[frames[i].parent]});
  }
  for (Head& h : heads) h.frame = remap[h.frame];
  frames = std::move(kept);
}

}  // namespace

// Head sets ("configurations": states with their stacks) interned as lazy DFA states, with their byte
// transitions computed once: a trie walk then costs a table lookup per node, not a closure expansion.
struct CompiledGrammar::Walks {
  uint8_t class_of[256];  // bytes no edge tells apart share a class
  uint8_t rep[256];       // a byte of each class
  size_t classes = 0;
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<std::string> keys;
  size_t keys_bytes = 0;  // what ids and keys hold (memory_bytes)
  // Per configuration and class: ((next configuration + 1, 0 when no head survives) << 1) | (the bottom
  // frame's rule ended), or -1 when not computed yet.
  std::vector<int32_t> trans;
  std::vector<uint32_t> need;  // per configuration: fewest bytes to the grammar's end, UINT32_MAX unknown
  // Per configuration: a head is in free text (a state with an unbounded plain_remaining) and no other head
  // takes a byte that starts plain text, so a plain-text token is accepted, ends in that text, and never
  // returns from the bottom rule.
  std::vector<uint8_t> free_plain;
  const Grammar* grammar = nullptr;
  // Scratch bits of a root walk: the plain-text tokens of the root's children that are not free text
  // (all zero between walks).
  std::vector<uint64_t> not_free;
  std::vector<uint32_t> key_words;  // scratch of decode() and is_free_plain(): a key as words
  std::vector<Head> heads, out;
  std::vector<Frame> frames;
  // Per real-stack configuration of one head: the tokens its state's return nodes allow (the replay and
  // walk fill does for them), so a head met again costs a copy of those tokens.
  std::unordered_map<uint32_t, std::vector<uint32_t>> returns;
  size_t returns_tokens = 0;
  // Walks of the non-plain tokens below a node reached in free text, by (other_trie() node, configuration,
  // cd mode, under a return node): what TrieWalker::walk_other() replays.
  struct OtherWalk {
    std::vector<uint32_t> tokens, cd_nodes, ends;
    bool end_seen = false;
  };
  std::unordered_map<uint64_t, OtherWalk> other_walks;
  size_t other_walks_size = 0;
  std::vector<uint32_t> sig_id, sig_order, sig_out;  // scratch of mask_signature()
  std::vector<uint64_t> mask_scratch;  // a state's mask while it is walked (all zero between walks)
  WorkMeter meter;                     // restarted by each computing pass (fill, keep_within)

  // A configuration's key: per head (sorted) its state, its stack depth and its return states, top first.
  static std::string encode(const std::vector<Head>& hs, const std::vector<Frame>& fs) {
    std::vector<std::vector<uint32_t>> each;
    for (const Head& h : hs) {
      std::vector<uint32_t> v{h.state, 0};
      for (uint32_t f = h.frame; f != 0; f = fs[f].parent) v.push_back(fs[f].ret);
      v[1] = static_cast<uint32_t>(v.size() - 2);
      each.push_back(std::move(v));
    }
    std::sort(each.begin(), each.end());
    each.erase(std::unique(each.begin(), each.end()), each.end());
    std::string key;
    for (const auto& v : each)
      key.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint32_t));
    return key;
  }

  void decode(const std::string& key) {
    heads.clear();
    frames.assign(1, {0, 0});
    std::vector<uint32_t>& v = key_words;
    v.resize(key.size() / sizeof(uint32_t));
    std::memcpy(v.data(), key.data(), key.size());
    for (size_t i = 0; i < v.size();) {
      const uint32_t state = v[i], depth = v[i + 1];
      uint32_t f = 0;
      for (uint32_t k = depth; k-- > 0;) {
        frames.push_back({v[i + 2 + k], f});
        f = static_cast<uint32_t>(frames.size() - 1);
      }
      heads.push_back({state, f});
      i += 2 + depth;
    }
  }

  uint32_t intern(std::string key) {
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    const auto id = static_cast<uint32_t>(keys.size());
    ids.emplace(key, id);
    keys.push_back(std::move(key));
    keys_bytes += 2 * (keys.back().capacity() + sizeof(std::string)) + 32;  // in ids and in keys
    trans.resize(trans.size() + classes, -1);
    need.push_back(UINT32_MAX);
    free_plain.push_back(is_free_plain(keys.back()) ? 1 : 0);
    return id;
  }

  bool is_free_plain(const std::string& key) {
    std::vector<uint32_t>& v = key_words;
    v.resize(key.size() / sizeof(uint32_t));
    std::memcpy(v.data(), key.data(), key.size());
    bool free = false;
    for (size_t i = 0; i < v.size(); i += 2 + v[i + 1]) {
      const Grammar::State& st = grammar->states[v[i]];
      if (st.plain_remaining == INT32_MAX) {
        free = true;
        continue;
      }
      for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
        if (starts_plain_in(grammar->edges[e].lo, grammar->edges[e].hi)) return false;
      }
    }
    return free;
  }

  int32_t step(const Grammar& g, uint32_t cfg, uint8_t byte) {
    const size_t cls = class_of[byte];
    meter.charge(1);
    if (trans[cfg * classes + cls] >= 0) return trans[cfg * classes + cls];
    decode(keys[cfg]);
    out.clear();
    Stepper st{g, frames, out, 0, frames.size(), true, false, false, &meter};
    for (const Head& h : heads) {
      const int64_t t = g.next(h.state, rep[cls]);
      if (t >= 0) st.expand(static_cast<uint32_t>(t), h.frame);
    }
    const uint32_t next = out.empty() ? 0 : intern(encode(out, frames)) + 1;
    const auto v = static_cast<int32_t>((next << 1) | (st.popped ? 1u : 0u));
    trans[cfg * classes + cls] = v;
    return v;
  }

  // A real-stack configuration's fewest bytes to the grammar's end (one byte, then each head's way out).
  uint32_t need_of(const Grammar& g, const std::vector<uint32_t>& d, uint32_t cfg) {
    if (need[cfg] != UINT32_MAX) return need[cfg];
    decode(keys[cfg]);
    uint64_t best = UINT32_MAX / 2;
    for (const Head& h : heads) {
      const Grammar::State& st = g.states[h.state];
      uint64_t step = UINT32_MAX / 4;
      for (uint32_t e = st.edges_begin; e < st.edges_end; ++e)
        step = std::min<uint64_t>(step, d[g.edges[e].to]);
      uint64_t total = 1 + step;
      for (uint32_t f = h.frame; f != 0; f = frames[f].parent) total += d[frames[f].ret];
      best = std::min(best, total);
    }
    need[cfg] = static_cast<uint32_t>(std::min<uint64_t>(best, UINT32_MAX - 1));
    return need[cfg];
  }

  void clear() {
    ids.clear();
    keys.clear();
    keys_bytes = 0;
    trans.clear();
    need.clear();
    free_plain.clear();
    returns.clear();
    returns_tokens = 0;
    other_walks.clear();
    other_walks_size = 0;
  }

  // After an exception inside a walk (std::bad_alloc): the scratch buffers hold leftover bits or numbers
  // that the next walk would read as its own (extra tokens allowed), and a configuration's returns may be
  // half computed. Back to the state between walks; the cached state masks are complete (kept only at the
  // end of their walk) and stay.
  void reset_after_throw() {
    clear();
    std::fill(not_free.begin(), not_free.end(), 0);
    std::fill(mask_scratch.begin(), mask_scratch.end(), 0);
    std::fill(sig_id.begin(), sig_id.end(), UINT32_MAX);
  }

  // Calls reset_after_throw() when its scope is left by an exception.
  struct ResetOnThrow {
    Walks& w;
    const int exceptions = std::uncaught_exceptions();
    ~ResetOnThrow() {
      if (std::uncaught_exceptions() > exceptions) w.reset_after_throw();
    }
  };
};

namespace {

// Walks the vocabulary trie below a node from a configuration, setting the bits of the tokens allowed. With
// cd_nodes (a walk for a state's context-independent mask, the bottom frame standing for an unknown stack)
// a token is allowed when a head survives it, and the topmost nodes where the bottom rule ended are
// recorded; otherwise (the real stack) the bottom rule ending means the grammar ended: allowed too.
struct TrieWalker {
  const Grammar& g;
  const TokenTrie& v;
  CompiledGrammar::Walks& w;
  std::vector<uint64_t>& bits;
  std::vector<uint32_t>* cd_nodes;
  // With cd_nodes: tokens at every node where the bottom rule ended.
  std::vector<uint64_t>* end_bits = nullptr;
  // When set, the tokens allowed go there instead of into bits.
  std::vector<uint32_t>* list = nullptr;
  // Set when v is the vocabulary's full trie: below a node reached in free text by plain-text bytes, the
  // plain-text tokens come from the vocabulary's list and only the other tokens are walked (in its
  // other_trie(), cd_nodes mapped back to the full trie).
  const TokenVocab* vocab = nullptr;
  const std::vector<uint32_t>* cd_map = nullptr;
  // When set (a walk kept by walk_other), the tokens after which the bottom rule ended go there, and
  // *end_seen is set where it ended at all, instead of into end_bits.
  std::vector<uint32_t>* end_list = nullptr;
  bool* end_seen = nullptr;

  // The walk of other_trie() below its node o from cfg, in free text: the same for every state whose walk
  // gets there with that configuration (each position of a property name's trie: its leave-the-trie branches
  // share their configurations), so walked once per grammar and kept as lists.
  void walk_other(uint32_t o, uint32_t cfg, bool under_cd) {
    const uint64_t key =
        (uint64_t{o} << 34) | (uint64_t{cfg} << 2) | (cd_nodes ? 2u : 0u) | (under_cd ? 1u : 0u);
    auto [it, fresh] = w.other_walks.try_emplace(key);
    CompiledGrammar::Walks::OtherWalk& ow = it->second;
    if (fresh) {
      std::vector<uint64_t> unused;
      TrieWalker rest{
          g,       vocab->other_trie(),    w, unused, cd_nodes ? &ow.cd_nodes : nullptr, nullptr, &ow.tokens,
          nullptr, &vocab->other_to_full()};
      rest.end_list = &ow.ends;
      rest.end_seen = &ow.end_seen;
      rest.walk(o, cfg, under_cd);
      w.other_walks_size += ow.tokens.size() + ow.cd_nodes.size() + ow.ends.size() + 8;
    }
    if (list) {
      list->insert(list->end(), ow.tokens.begin(), ow.tokens.end());
    } else {
      for (const uint32_t id : ow.tokens) bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (cd_nodes) cd_nodes->insert(cd_nodes->end(), ow.cd_nodes.begin(), ow.cd_nodes.end());
    if (end_bits && ow.end_seen) {
      if (end_bits->empty()) end_bits->assign(bits.size(), 0);
      for (const uint32_t id : ow.ends) (*end_bits)[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }

  void set_plain_below(uint32_t node) {
    const std::span<const int32_t> ids = vocab->plain_below(node);
    if (list) {
      list->insert(list->end(), ids.begin(), ids.end());
      return;
    }
    for (const int32_t id : ids) bits[static_cast<uint32_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }

  void set_tokens(uint32_t node) {
    if (!list) return set_tokens(node, bits);
    const auto& n = v.nodes[node];
    for (uint32_t k = n.tokens_begin; k < n.tokens_end; ++k)
      list->push_back(static_cast<uint32_t>(v.tokens[k]));
  }
  void set_tokens(uint32_t node, std::vector<uint64_t>& out) {
    const auto& n = v.nodes[node];
    for (uint32_t k = n.tokens_begin; k < n.tokens_end; ++k) {
      const auto id = static_cast<uint32_t>(v.tokens[k]);
      out[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }

  // Whether from cfg every well-formed character led by `lead` is taken, the bottom rule not ending, into
  // free text: its continuation bytes stepped one byte class at a time (cached transitions), false past a
  // budget of steps.
  bool chars_free(uint32_t cfg, uint8_t lead) {
    const PlainStart& p = kPlainStart[lead];
    const int32_t t = w.step(g, cfg, lead);
    if ((t & 1) || (t >> 1) == 0) return false;
    int budget = 4096;
    return conts_free(static_cast<uint32_t>(t >> 1) - 1, p.len - 1, p.lo, p.hi, budget);
  }
  bool conts_free(uint32_t cfg, int left, uint8_t lo, uint8_t hi, int& budget) {
    for (int b = lo; b <= hi; ++b) {
      if (b > lo && w.class_of[b] == w.class_of[b - 1]) continue;
      if (--budget < 0) return false;
      const int32_t t = w.step(g, cfg, static_cast<uint8_t>(b));
      if ((t & 1) || (t >> 1) == 0) return false;
      const uint32_t next = static_cast<uint32_t>(t >> 1) - 1;
      if (left == 1 ? !w.free_plain[next] : !conts_free(next, left - 1, 0x80, 0xBF, budget)) return false;
    }
    return true;
  }
  // A root child of the full trie whose plain-text tokens are all allowed, each ending in free text: a plain
  // ASCII character stepping into free text, or a lead byte whose every character does (chars_free).
  bool root_free(uint32_t c, uint32_t cfg) {
    const uint8_t b = v.nodes[c].byte;
    if (vocab->plain_path(c)) {
      const auto next = static_cast<uint32_t>(w.step(g, cfg, b)) >> 1;
      return next && w.free_plain[next - 1];
    }
    return kPlainStart[b].len > 1 && chars_free(cfg, b);
  }

  // At the root of the full trie, writing bits: when the plain-text tokens of the root_free() children
  // outnumber the others' by more than a mask's words, OR the vocabulary's plain_from_root() less the
  // others' a word at a time instead of setting them one by one. The children's flags go to `free_child`
  // (by edge from the root's first); false when not done.
  bool or_plain_from_root(uint32_t cfg, std::vector<uint8_t>& free_child) {
    const auto& nodes = v.nodes;
    size_t free_tokens = 0, other_tokens = 0;
    free_child.assign(nodes[0].edges_end - nodes[0].edges_begin, 0);
    for (uint32_t e = nodes[0].edges_begin; e < nodes[0].edges_end; ++e) {
      const uint32_t c = v.children[e];
      const uint8_t free = root_free(c, cfg) ? 1 : 0;
      free_child[e - nodes[0].edges_begin] = free;
      (free ? free_tokens : other_tokens) += vocab->plain_below(c).size();
    }
    const std::vector<uint64_t>& all = vocab->plain_from_root();
    if (free_tokens <= other_tokens + all.size()) return false;
    std::vector<uint64_t>& skip = w.not_free;
    if (skip.size() != all.size()) skip.assign(all.size(), 0);
    for (uint32_t e = nodes[0].edges_begin; e < nodes[0].edges_end; ++e) {
      if (free_child[e - nodes[0].edges_begin]) continue;
      for (const int32_t id : vocab->plain_below(v.children[e]))
        skip[static_cast<uint32_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    for (size_t i = 0; i < all.size(); ++i) {
      bits[i] |= all[i] & ~skip[i];
      skip[i] = 0;
    }
    return true;
  }

  void walk(uint32_t node, uint32_t cfg, bool under_cd) {
    const auto& nodes = v.nodes;
    const auto& children = v.children;
    std::vector<uint8_t> free_child;
    const bool root_done = node == 0 && vocab && !list && or_plain_from_root(cfg, free_child);
    for (uint32_t e = nodes[node].edges_begin; e < nodes[node].edges_end; ++e) {
      const uint32_t c = children[e];
      const int32_t t = w.step(g, cfg, nodes[c].byte);
      const auto next = static_cast<uint32_t>(t) >> 1;
      const bool bottom = (t & 1) != 0;
      bool cd_here = under_cd;
      // A lead byte whose characters all reach free text: its plain tokens are in the root's bits (its own
      // token, the lead alone, is one), only the others are walked.
      if (root_done && free_child[e - nodes[0].edges_begin] && !vocab->plain_path(c)) {
        const uint32_t o = vocab->other_node(c);
        if (o != TokenVocab::kNoNode) {
          walk_other(o, next - 1, cd_here);
        }
        continue;
      }
      const bool free = next && vocab && w.free_plain[next - 1] && vocab->plain_path(c);
      if (cd_nodes) {
        if (bottom && !under_cd) {
          cd_nodes->push_back(cd_map ? (*cd_map)[c] : c);
          cd_here = true;
        }
        if (next && !free) set_tokens(c);
        if (bottom && end_list) {
          *end_seen = true;
          const auto& n = v.nodes[c];
          for (uint32_t k = n.tokens_begin; k < n.tokens_end; ++k)
            end_list->push_back(static_cast<uint32_t>(v.tokens[k]));
        } else if (bottom && end_bits) {
          if (end_bits->empty()) end_bits->assign(bits.size(), 0);
          set_tokens(c, *end_bits);
        }
      } else if ((next || bottom) && !free) {
        set_tokens(c);
      }
      if (free) {
        if (!root_done) set_plain_below(c);
        const uint32_t o = vocab->other_node(c);
        if (o != TokenVocab::kNoNode) {
          walk_other(o, next - 1, cd_here);
        }
        continue;
      }
      if (next) walk(c, next - 1, cd_here);
    }
  }
};

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab,
                                 uint64_t work_limit)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      work_limit_(work_limit),
      walks_(std::make_unique<Walks>()) {
  walks_->meter.limit = work_limit;
  bool cut[257] = {};
  cut[0] = cut[256] = true;
  for (const Grammar::Edge& e : grammar_.edges) cut[e.lo] = cut[e.hi + 1] = true;
  for (int b = 0; b < 256; ++b) {
    if (cut[b]) walks_->rep[walks_->classes++] = static_cast<uint8_t>(b);
    walks_->class_of[b] = static_cast<uint8_t>(walks_->classes - 1);
  }
  walks_->grammar = &grammar_;
}

CompiledGrammar::~CompiledGrammar() = default;

size_t CompiledGrammar::memory_bytes() const {
  // Never waits: while a matcher computes under the exclusive lock (up to the work limit, about a second),
  // the last measure stands, or at least the automaton's own bytes (which never change).
  std::shared_lock<std::shared_mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    return std::max(last_memory_bytes_.load(std::memory_order_relaxed),
                    sizeof(CompiledGrammar) + sizeof(Walks) + grammar_bytes(grammar_));
  }
  size_t bytes = sizeof(CompiledGrammar) + sizeof(Walks) + grammar_bytes(grammar_) +
                 distances_.capacity() * sizeof(uint32_t);
  for (const auto& [state, mask] : masks_) {
    bytes +=
        64 + sizeof(StateMask) + (mask->bits.capacity() + mask->end_bits.capacity()) * sizeof(uint64_t) +
        (mask->cd_nodes.capacity() + mask->bits_words.index.capacity() + mask->end_words.index.capacity()) *
            sizeof(uint32_t);
  }
  const Walks& w = *walks_;
  bytes += w.keys_bytes + w.trans.capacity() * sizeof(int32_t) + w.need.capacity() * sizeof(uint32_t) +
           w.free_plain.capacity() + (w.not_free.capacity() + w.mask_scratch.capacity()) * sizeof(uint64_t) +
           (w.returns_tokens + w.other_walks_size) * sizeof(uint32_t);
  last_memory_bytes_.store(bytes, std::memory_order_relaxed);
  return bytes;
}

std::shared_ptr<const StateMask> TokenVocab::shared_mask(const std::string& signature) const {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  auto it = shared_.find(signature);
  return it == shared_.end() ? nullptr : it->second;
}

void TokenVocab::share_mask(const std::string& signature, std::shared_ptr<const StateMask> mask) const {
  constexpr size_t kMaxShared = 2048;  // at most 16 KiB each on a 131k vocabulary (most a few hundred bytes)
  std::lock_guard<std::mutex> lock(shared_mutex_);
  if (shared_.size() < kMaxShared) shared_.emplace(signature, std::move(mask));
}

namespace {

// What a state's context-independent mask depends on: the automaton reachable from it (byte edges,
// closures, calls into other rules, rule ends), numbered in discovery order, so equal structures in
// different rules or grammars give equal strings. Empty when more than a few hundred states are reachable
// (a state deep inside a large object: its mask is cheap and specific anyway).
std::string mask_signature(const Grammar& g, uint32_t state, CompiledGrammar::Walks& w) {
  constexpr size_t kMaxStates = 512;
  // Scratch kept in the walks (under the grammar's exclusive lock): a state's number, UINT32_MAX when not
  // met yet, reset on the way out. A hash map here cost a node per state met, freed again at once, for
  // every new state of a large object (whose signature gives up after 512 states).
  std::vector<uint32_t>& id = w.sig_id;
  std::vector<uint32_t>& order = w.sig_order;
  std::vector<uint32_t>& out = w.sig_out;
  if (id.size() != g.states.size()) id.assign(g.states.size(), UINT32_MAX);
  order.clear();
  out.clear();
  auto canon = [&](uint32_t s) {
    if (id[s] == UINT32_MAX) {
      id[s] = static_cast<uint32_t>(order.size());
      order.push_back(s);
    }
    return id[s];
  };
  canon(state);
  bool too_many = false;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order.size() > kMaxStates) {
      too_many = true;
      break;
    }
    const Grammar::State& st = g.states[order[i]];
    out.push_back(UINT32_MAX);
    out.push_back((st.final ? 1u : 0u) | (st.tail_call ? 2u : 0u) | (st.call_rule >= 0 ? 4u : 0u));
    if (st.call_rule >= 0) {
      out.push_back(canon(g.rule_start[static_cast<size_t>(st.call_rule)]));
      out.push_back(canon(st.call_next));
    }
    for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
      out.push_back(g.edges[e].lo | (static_cast<uint32_t>(g.edges[e].hi) << 8));
      out.push_back(canon(g.edges[e].to));
    }
    out.push_back(UINT32_MAX - 1);
    for (uint32_t k = st.closure_begin; k < st.closure_end; ++k) out.push_back(canon(g.closure[k]));
  }
  for (const uint32_t s : order) id[s] = UINT32_MAX;
  if (too_many) return {};
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(uint32_t));
}

NonzeroWords nonzero_words(const std::vector<uint64_t>& bits) {
  NonzeroWords nz;
  for (size_t w = 0; w < bits.size(); ++w) {
    if (bits[w]) nz.index.push_back(static_cast<uint32_t>(w));
  }
  nz.all = nz.index.size() * 4 > bits.size();
  if (nz.all) nz.index = {};
  return nz;
}

// src: a whole mask, or (nz.all false) only its nonzero words, in nz.index order.
void or_into(std::vector<uint64_t>& bits, const std::vector<uint64_t>& src, const NonzeroWords& nz) {
  if (nz.all) {
    for (size_t w = 0; w < src.size(); ++w) bits[w] |= src[w];
  } else {
    for (size_t k = 0; k < nz.index.size(); ++k) bits[nz.index[k]] |= src[k];
  }
}

// Keeps a mask computed in `scratch` as or_into() reads it: whole when many words are nonzero, else only
// the nonzero words (most states allow a few hundred tokens: a new state then takes a few hundred bytes,
// not 16 KiB of fresh memory); the scratch is left all zero.
void keep_mask(std::vector<uint64_t>& scratch, std::vector<uint64_t>& kept, NonzeroWords& nz) {
  nz = nonzero_words(scratch);
  if (nz.all) {
    kept = scratch;
    std::fill(scratch.begin(), scratch.end(), 0);
    return;
  }
  kept.clear();
  kept.reserve(nz.index.size());
  for (const uint32_t w : nz.index) {
    kept.push_back(scratch[w]);
    scratch[w] = 0;
  }
}

}  // namespace

const CompiledGrammar::StateMask& CompiledGrammar::state_mask_locked(uint32_t state) const {
  auto it = masks_.find(state);
  if (it != masks_.end()) return *it->second;
  const std::string signature = mask_signature(grammar_, state, *walks_);
  if (!signature.empty()) {
    if (auto shared = vocab_->shared_mask(signature))
      return *masks_.emplace(state, std::move(shared)).first->second;
  }
  auto m = std::make_shared<StateMask>();
  std::vector<uint64_t>& scratch = walks_->mask_scratch;  // all zero between uses
  scratch.resize((vocab_->size() + 63) / 64, 0);
  const int32_t plain = grammar_.states[state].plain_remaining;
  if (plain >= 0) {
    // Plain-text tokens from the per-vocabulary table by character count; only the others are walked.
    const auto table = vocab_->plain_upto(plain);
    std::copy(table->begin(), table->end(), scratch.begin());
    m->other_trie = true;
  }
  const std::vector<Frame> bottom{{0, 0}};
  const uint32_t cfg = walks_->intern(Walks::encode({{state, 0}}, bottom));
  TrieWalker w{grammar_,     m->other_trie ? vocab_->other_trie() : vocab_->trie(),
               *walks_,      scratch,
               &m->cd_nodes, &m->end_bits,
               nullptr,      m->other_trie ? nullptr : vocab_.get()};
  w.walk(0, cfg, false);
  keep_mask(scratch, m->bits, m->bits_words);
  if (!m->end_bits.empty()) {
    std::vector<uint64_t> ends = std::move(m->end_bits);
    keep_mask(ends, m->end_bits, m->end_words);
  }
  if (!signature.empty()) vocab_->share_mask(signature, m);
  return *masks_.emplace(state, std::move(m)).first->second;
}

bool CompiledGrammar::or_heads(const std::vector<Head>& heads, const std::vector<Frame>& frames,
                               std::vector<uint64_t>& bits, bool compute) const {
  // Heads often share a state mask (one state under several stacks, equal structures shared by signature):
  // each is ORed once.
  std::vector<const StateMask*> ored, ended;
  auto first = [](std::vector<const StateMask*>& seen, const StateMask* m) {
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) return false;
    seen.push_back(m);
    return true;
  };
  std::vector<uint8_t> path;
  for (const Head& h : heads) {
    const StateMask* m = nullptr;
    if (compute) {
      m = &state_mask_locked(h.state);
    } else if (auto it = masks_.find(h.state); it != masks_.end()) {
      m = it->second.get();
    } else {
      return false;
    }
    const StateMask& sm = *m;
    if (first(ored, &sm)) or_into(bits, sm.bits, sm.bits_words);
    if (sm.cd_nodes.empty()) continue;
    if (h.frame == 0) {
      // Nothing below: the rule's end is the grammar's, after which no byte comes, so the walk with the
      // real stack would add exactly the tokens that end it (free text that may stop anywhere: no walk).
      if (first(ended, &sm)) or_into(bits, sm.end_bits, sm.end_words);
      continue;
    }
    // Where the state's rule returns, the real stack decides: replay the bytes down to the node, then walk
    // its subtree; once per configuration (state and stack), the tokens kept.
    const std::vector<uint32_t>* kept = nullptr;
    if (!compute) {
      auto id = walks_->ids.find(Walks::encode({h}, frames));
      if (id == walks_->ids.end()) return false;
      auto ret = walks_->returns.find(id->second);
      if (ret == walks_->returns.end()) return false;
      kept = &ret->second;
    } else {
      const uint32_t start = walks_->intern(Walks::encode({h}, frames));
      auto [slot, fresh] = walks_->returns.try_emplace(start);
      std::vector<uint32_t>& tokens = slot->second;
      if (fresh) {
        const TokenTrie& v = sm.other_trie ? vocab_->other_trie() : vocab_->trie();
        TrieWalker walker{grammar_, v,       *walks_, bits,
                          nullptr,  nullptr, &tokens, sm.other_trie ? nullptr : vocab_.get()};
        for (uint32_t c : sm.cd_nodes) {
          path.clear();
          for (uint32_t n = c; n != 0; n = v.nodes[n].parent) path.push_back(v.nodes[n].byte);
          uint32_t cfg = start;
          int32_t t = 0;
          for (size_t i = path.size(); i-- > 0;) {
            t = walks_->step(grammar_, cfg, path[i]);
            if ((t >> 1) == 0) break;
            cfg = static_cast<uint32_t>(t >> 1) - 1;
          }
          const bool alive = (t >> 1) != 0;
          if (alive || (t & 1)) walker.set_tokens(c);
          if (alive) walker.walk(c, cfg, false);
        }
        tokens.shrink_to_fit();
        walks_->returns_tokens += tokens.size() + 8;
      }
      kept = &tokens;
    }
    for (uint32_t t : *kept) bits[t >> 6] |= uint64_t{1} << (t & 63);
  }
  return true;
}

void CompiledGrammar::fill(const std::vector<Head>& heads, const std::vector<Frame>& frames,
                           std::vector<uint64_t>& bits) const {
  {
    // What a lookup pass that stops at a missing entry ORed in is a subset of the mask: the pass that
    // computes may OR it again.
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (or_heads(heads, frames, bits, false)) return;
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const Walks::ResetOnThrow reset_on_throw{*walks_};
  walks_->meter.used = 0;
  constexpr size_t kMaxConfigurations = 200000;  // bounds the cache when stacks keep growing
  if (walks_->keys.size() > kMaxConfigurations) walks_->clear();
  if (walks_->returns_tokens > (size_t{1} << 23)) {  // 32 MiB of cached returns
    walks_->returns.clear();
    walks_->returns_tokens = 0;
  }
  if (walks_->other_walks_size > (size_t{1} << 23)) {
    walks_->other_walks.clear();
    walks_->other_walks_size = 0;
  }
  or_heads(heads, frames, bits, true);
  peak_work_ = std::max(peak_work_, walks_->meter.used);
}

size_t CompiledGrammar::keep_within(const std::vector<Head>& heads, const std::vector<Frame>& frames,
                                    std::vector<uint64_t>& bits, uint32_t bytes) const {
  const std::vector<uint32_t>& d = distances();
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const Walks::ResetOnThrow reset_on_throw{*walks_};
  walks_->meter.used = 0;
  constexpr size_t kMaxConfigurations = 200000;
  if (walks_->keys.size() > kMaxConfigurations) walks_->clear();
  const TokenVocab& v = *vocab_;
  std::vector<uint64_t> keep(bits.size(), 0);
  for (int32_t id : v.end_ids()) {
    if ((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1)
      keep[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  // Depth-first over the trie with the configuration after each prefix (cached transitions): a token is
  // kept when the grammar can end right after it or its configuration is within `bytes` of the end.
  struct Item {
    uint32_t node, cfg;
  };
  std::vector<Item> todo{{0, walks_->intern(Walks::encode(heads, frames))}};
  while (!todo.empty()) {
    const Item it = todo.back();
    todo.pop_back();
    const auto& n = v.nodes()[it.node];
    for (uint32_t e = n.edges_begin; e < n.edges_end; ++e) {
      const uint32_t c = v.children()[e];
      const int32_t t = walks_->step(grammar_, it.cfg, v.nodes()[c].byte);
      const auto next = static_cast<uint32_t>(t) >> 1;
      if (next == 0 && !(t & 1)) continue;
      const bool fits = (t & 1) || walks_->need_of(grammar_, d, next - 1) <= bytes;
      if (fits) {
        const auto& cn = v.nodes()[c];
        for (uint32_t k = cn.tokens_begin; k < cn.tokens_end; ++k) {
          const auto id = static_cast<uint32_t>(v.tokens()[k]);
          keep[id >> 6] |= bits[id >> 6] & (uint64_t{1} << (id & 63));
        }
      }
      if (next) todo.push_back({c, next - 1});
    }
  }
  peak_work_ = std::max(peak_work_, walks_->meter.used);
  size_t count = 0;
  for (size_t w = 0; w < bits.size(); ++w) {
    bits[w] = keep[w];
    count += bits_set(bits[w]);
  }
  return count;
}

uint64_t CompiledGrammar::peak_work() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return peak_work_;
}

const std::vector<uint32_t>& CompiledGrammar::distances() const {
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (!distances_.empty()) return distances_;  // computed once, never changed after
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (!distances_.empty()) return distances_;
  distances_ = completion_distances(grammar_);
  return distances_;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : compiled_(std::move(grammar)), grammar_ptr_(&compiled_->grammar()) {
  frames_.push_back({0, 0});
  Stepper st{g(), frames_, heads_, 0, 1, false};
  st.expand(g().rule_start[g().root_rule], 0);
  accepting_ = st.accept;
  collect_frames(heads_, frames_);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_holder_(std::move(grammar)), grammar_ptr_(grammar_holder_.get()) {
  frames_.push_back({0, 0});
  Stepper st{g(), frames_, heads_, 0, 1, false};
  st.expand(g().rule_start[g().root_rule], 0);
  accepting_ = st.accept;
  collect_frames(heads_, frames_);
}

bool GrammarMatcher::advance(std::string_view bytes) {
  if (ended_) return bytes.empty();
  std::vector<Head> heads = heads_;
  std::vector<Frame> frames = frames_;
  bool accepting = accepting_;
  std::vector<Head> next;
  WorkMeter meter{0, compiled_ ? compiled_->work_limit() : kDefaultWorkLimit};
  for (char c : bytes) {
    next.clear();
    Stepper st{g(), frames, next, 0, frames.size(), false, false, false, &meter};
    for (const Head& h : heads) {
      const int64_t t = g().next(h.state, static_cast<uint8_t>(c));
      if (t >= 0) st.expand(static_cast<uint32_t>(t), h.frame);
    }
    if (next.empty() && !st.accept) return false;
    accepting = st.accept;
    heads.swap(next);
    collect_frames(heads, frames);
  }
  heads_ = std::move(heads);
  frames_ = std::move(frames);
  accepting_ = accepting;
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (!compiled_ || id < 0 || static_cast<size_t>(id) >= compiled_->vocab().size() || ended_) return false;
  const auto& ends = compiled_->vocab().end_ids();
  if (std::find(ends.begin(), ends.end(), id) != ends.end()) {
    if (!accepting_) return false;
    ended_ = true;
    return true;
  }
  const std::string& b = compiled_->vocab().bytes(id);
  if (b.empty()) return false;
  return advance(b);
}

bool GrammarMatcher::allows_token(int32_t id) const {
  GrammarMatcher copy = *this;
  return copy.accept_token(id);
}

size_t GrammarMatcher::fill_mask(std::vector<uint64_t>& bits) const {
  const TokenVocab& v = compiled_->vocab();
  bits.assign((v.size() + 63) / 64, 0);
  if (ended_) return 0;
  compiled_->fill(heads_, frames_, bits);
  if (accepting_) {
    for (int32_t id : v.end_ids()) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  size_t count = 0;
  for (uint64_t w : bits) count += bits_set(w);
  return count;
}

uint32_t GrammarMatcher::min_completion_bytes() const {
  if (accepting_ || ended_) return 0;
  const auto& d = compiled_->distances();
  uint32_t best = UINT32_MAX;
  for (const Head& h : heads_) {
    // A head's other moves (ending its rule, calls) are heads of their own already: only its byte counts.
    const Grammar::State& st = g().states[h.state];
    uint32_t step = UINT32_MAX / 4;
    for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) step = std::min(step, d[g().edges[e].to]);
    uint64_t total = 1 + static_cast<uint64_t>(step);
    for (uint32_t f = h.frame; f != 0; f = frames_[f].parent) total += d[frames_[f].ret];
    best = static_cast<uint32_t>(std::min<uint64_t>(best, total));
  }
  return best;
}

size_t GrammarMatcher::restrict_to_shortest(std::vector<uint64_t>& bits) const {
  std::vector<uint64_t> keep(bits.size(), 0);
  auto set = [&](int32_t id) {
    if (id >= 0) keep[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  };
  if (accepting_) {
    for (int32_t id : compiled_->vocab().end_ids()) set(id);
  } else {
    const auto& d = compiled_->distances();
    const uint32_t target = min_completion_bytes();
    for (const Head& h : heads_) {
      uint64_t below = 0;
      for (uint32_t f = h.frame; f != 0; f = frames_[f].parent) below += d[frames_[f].ret];
      const Grammar::State& st = g().states[h.state];
      for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
        if (1 + d[g().edges[e].to] + below != target) continue;
        for (uint32_t b = g().edges[e].lo; b <= g().edges[e].hi; ++b)
          set(compiled_->vocab().byte_token(static_cast<uint8_t>(b)));
      }
    }
  }
  size_t count = 0;
  for (size_t w = 0; w < bits.size(); ++w) {
    bits[w] &= keep[w];
    count += bits_set(bits[w]);
  }
  return count;
}

size_t GrammarMatcher::restrict_to_budget(std::vector<uint64_t>& bits, uint32_t bytes_after) const {
  if (ended_) return 0;
  return compiled_->keep_within(heads_, frames_, bits, bytes_after);
}

std::string GrammarMatcher::shortest_completion() const {
  std::string out;
  if (ended_ || !compiled_) return out;
  const auto& d = compiled_->distances();
  GrammarMatcher m = *this;
  while (!m.accepting_ && !m.heads_.empty()) {
    const uint32_t target = m.min_completion_bytes();
    // Any byte on a shortest path will do: a letter, else a digit, else anything printable reads better
    // than a tab or a control byte.
    int next = -1, rank = 4;
    for (const Head& h : m.heads_) {
      uint64_t below = 0;
      for (uint32_t f = h.frame; f != 0; f = m.frames_[f].parent) below += d[m.frames_[f].ret];
      const Grammar::State& st = g().states[h.state];
      for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
        if (1 + d[g().edges[e].to] + below != target) continue;
        const int lo = g().edges[e].lo, hi = g().edges[e].hi;
        const int picks[3] = {'a', '0', std::max(lo, 0x21)};
        for (int r = 0; r < 3 && r < rank; ++r) {
          if (lo <= picks[r] && picks[r] <= hi && picks[r] < 0x7F) {
            next = picks[r];
            rank = r;
          }
        }
        if (next < 0) next = lo;
      }
    }
    if (next < 0 || !m.advance(std::string(1, static_cast<char>(next)))) break;  // no completion at all
    out.push_back(static_cast<char>(next));
  }
  return out;
}

std::vector<int32_t> GrammarMatcher::shortest_completion_tokens() const {
  return compiled_ ? compiled_->vocab().fewest_tokens(shortest_completion()) : std::vector<int32_t>{};
}

std::vector<int32_t> TokenVocab::fewest_tokens(std::string_view text) const {
  // best[i]: fewest tokens spelling text[i..]; choice[i]: the first of them. Filled from the end, each
  // position walking the trie along the text.
  const size_t n = text.size();
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> best(n + 1, kNone);
  std::vector<int32_t> choice(n + 1, -1);
  best[n] = 0;
  for (size_t i = n; i-- > 0;) {
    uint32_t node = 0;
    for (size_t j = i; j < n; ++j) {
      uint32_t child = UINT32_MAX;
      for (uint32_t e = trie_.nodes[node].edges_begin; e < trie_.nodes[node].edges_end; ++e) {
        if (trie_.nodes[trie_.children[e]].byte == static_cast<uint8_t>(text[j])) {
          child = trie_.children[e];
          break;
        }
      }
      if (child == UINT32_MAX) break;
      node = child;
      const Node& nd = trie_.nodes[node];
      if (nd.tokens_begin != nd.tokens_end && best[j + 1] != kNone && best[j + 1] + 1 < best[i]) {
        best[i] = best[j + 1] + 1;
        choice[i] = trie_.tokens[nd.tokens_begin];
      }
    }
  }
  std::vector<int32_t> out;
  if (best[0] == kNone) return out;
  for (size_t i = 0; i < n;) {
    const int32_t id = choice[i];
    out.push_back(id);
    i += bytes_[static_cast<size_t>(id)].size();
  }
  return out;
}

bool grammar_matches(const Grammar& grammar, std::string_view text) {
  GrammarMatcher m(std::make_shared<const Grammar>(grammar));
  return m.advance(text) && m.can_end();
}

}  // namespace spark::grammar
