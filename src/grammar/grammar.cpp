#include "grammar/grammar.h"

#include <algorithm>
#include <map>
#include <queue>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "spark/error.h"

namespace spark::grammar {

size_t dfa_table_bytes(const DfaTable& table) {
  size_t bytes = sizeof(DfaTable) + table.edges.capacity() * sizeof(table.edges[0]) +
                 (table.exit.capacity() + table.plain.capacity()) * sizeof(int32_t);
  for (const auto& edges : table.edges) bytes += edges.capacity() * sizeof(DfaTable::Edge);
  return bytes;
}

size_t grammar_bytes(const Grammar& g) {
  size_t bytes = sizeof(Grammar) + g.states.capacity() * sizeof(Grammar::State) +
                 g.edges.capacity() * sizeof(Grammar::Edge) +
                 (g.closure.capacity() + g.rule_start.capacity()) * sizeof(uint32_t) +
                 g.rule_names.capacity() * sizeof(std::string);
  for (const std::string& name : g.rule_names) bytes += name.capacity();
  return bytes;
}

GrammarBuilder::GrammarBuilder() {
  empty_ = add({Node::kEmpty, {}, {}});
  nothing_ = add({Node::kNothing, {}, {}});
}

void GrammarBuilder::charge_intersection_work(size_t steps) {
  // 44x the most a JSONSchemaBench schema takes in all (1.5M), about two seconds.
  constexpr size_t kMaxIntersectionWork = size_t{1} << 26;
  intersection_work_ += steps;
  if (intersection_work_ > kMaxIntersectionWork) {
    throw Error("grammar too large: its intersections take more than " +
                std::to_string(kMaxIntersectionWork) + " steps");
  }
}

ExprId GrammarBuilder::add(Node n) {
  // Equal expressions are one node (they are never changed once made): an enum of 1 000 copies of a
  // 120-deep object made 1 000 copies of every node (2.4M nodes for 1.7 MB), and each character of a
  // property name its own escape alternatives. The hash starts from a per-process random seed and mixes
  // each field through splitmix64's finalizer: the nodes are the client's schema, and nodes crafted to
  // share a bucket would make each lookup a scan.
  static const uint64_t kSeed = (uint64_t{std::random_device()()} << 32) | std::random_device()();
  uint64_t h = kSeed;
  const auto mix = [&h](uint64_t v) {
    uint64_t z = h ^ v;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    h = z ^ (z >> 31);
  };
  mix(n.kind);
  mix(reinterpret_cast<uintptr_t>(n.dfa.get()));
  for (ByteRange r : n.ranges) mix(static_cast<uint64_t>(r.lo) << 8 | r.hi);
  for (ExprId k : n.kids) mix(static_cast<uint32_t>(k));
  mix(static_cast<uint32_t>(n.min));
  mix(static_cast<uint32_t>(n.max));
  mix(static_cast<uint32_t>(n.rule));
  const auto [first, last] = interned_.equal_range(h);
  for (auto it = first; it != last; ++it) {
    const Node& m = nodes_[static_cast<size_t>(it->second)];
    if (m.kind == n.kind && m.kids == n.kids && m.min == n.min && m.max == n.max && m.rule == n.rule &&
        m.dfa == n.dfa && m.ranges.size() == n.ranges.size() &&
        std::equal(m.ranges.begin(), m.ranges.end(), n.ranges.begin(),
                   [](ByteRange a, ByteRange b) { return a.lo == b.lo && a.hi == b.hi; })) {
      return it->second;
    }
  }
  nodes_.push_back(std::move(n));
  const auto id = static_cast<ExprId>(nodes_.size() - 1);
  interned_.emplace(h, id);
  return id;
}

ExprId GrammarBuilder::bytes(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](ByteRange a, ByteRange b) { return a.lo < b.lo; });
  std::vector<ByteRange> merged;
  for (ByteRange r : ranges) {
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (merged.empty()) return nothing_;
  return add({Node::kBytes, std::move(merged), {}});
}

ExprId GrammarBuilder::literal(std::string_view text) {
  std::vector<ExprId> parts;
  for (char c : text) parts.push_back(byte(static_cast<uint8_t>(c)));
  return seq(std::move(parts));
}

namespace {

// Splits [lo, hi] into ranges whose UTF-8 encodings have one length and share every byte but a suffix of
// full continuation ranges, so each becomes a sequence of byte sets (the construction of Rust's
// utf8-ranges).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  static constexpr uint32_t kMax[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  if (lo > hi) return;
  for (int n = 0; n < 3; ++n) {
    if (lo <= kMax[n] && hi > kMax[n]) {
      utf8_sequences(lo, kMax[n], out);
      utf8_sequences(kMax[n] + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int len = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  for (int i = 1; i < len; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  auto encode = [len](uint32_t cp, uint8_t* b) {
    if (len == 2) {
      b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    } else if (len == 3) {
      b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    } else {
      b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    }
  };
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ByteRange> seq;
  for (int i = 0; i < len; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

ExprId GrammarBuilder::codepoints(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<ByteRange>> seqs;
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo <= 0xD7FF) utf8_sequences(lo, std::min<uint32_t>(hi, 0xD7FF), seqs);
  if (hi >= 0xE000) utf8_sequences(std::max<uint32_t>(lo, 0xE000), hi, seqs);
  std::vector<ExprId> options;
  for (const auto& s : seqs) {
    std::vector<ExprId> parts;
    for (ByteRange r : s) parts.push_back(bytes({r}));
    options.push_back(seq(std::move(parts)));
  }
  return alt(std::move(options));
}

ExprId GrammarBuilder::seq(std::vector<ExprId> parts) {
  // Short sequences are spliced into their parent, long ones kept whole: splicing every one copied each
  // nested level into every level above it (an enum of 1 000 copies of a 120-deep object held 300 MB of
  // copies). The automaton is the same either way.
  constexpr size_t kSpliceKids = 16;
  std::vector<ExprId> flat;
  for (ExprId p : parts) {
    if (p == nothing_) return nothing_;
    if (p == empty_) continue;
    if (node(p).kind == Node::kSeq && node(p).kids.size() <= kSpliceKids) {
      flat.insert(flat.end(), node(p).kids.begin(), node(p).kids.end());
    } else {
      flat.push_back(p);
    }
  }
  if (flat.empty()) return empty_;
  if (flat.size() == 1) return flat[0];
  return add({Node::kSeq, {}, std::move(flat)});
}

ExprId GrammarBuilder::alt(std::vector<ExprId> options) {
  // Options kept once each; past a few, through a hash set (a scan per option made a regex of 400 000
  // alternatives, 0.8 MB, take 10 s to build).
  constexpr size_t kScanOptions = 16;
  std::vector<ExprId> kept;
  std::unordered_set<ExprId> seen;
  for (ExprId o : options) {
    if (o == nothing_) continue;
    if (kept.size() < kScanOptions) {
      if (std::find(kept.begin(), kept.end(), o) != kept.end()) continue;
      kept.push_back(o);
      if (kept.size() == kScanOptions) seen.insert(kept.begin(), kept.end());
    } else if (seen.insert(o).second) {
      kept.push_back(o);
    }
  }
  if (kept.empty()) return nothing_;
  if (kept.size() == 1) return kept[0];
  return add({Node::kAlt, {}, std::move(kept)});
}

ExprId GrammarBuilder::repeat(ExprId e, int min, int max) {
  if (max != kUnbounded && max < min) return nothing_;
  if (max == 0) return empty_;
  if (e == empty_) return empty_;
  if (e == nothing_) return min == 0 ? empty_ : nothing_;
  if (min == 1 && max == 1) return e;
  Node n{Node::kRepeat, {}, {e}};
  n.min = min;
  n.max = max;
  return add(std::move(n));
}

ExprId GrammarBuilder::call(int rule) {
  Node n{Node::kCall, {}, {}};
  n.rule = rule;
  return add(std::move(n));
}

ExprId GrammarBuilder::dfa(DfaTable table, std::vector<ExprId> exits) {
  if (table.edges.empty()) return nothing_;
  Node n{Node::kDfa, {}, std::move(exits)};
  n.dfa = std::make_shared<const DfaTable>(std::move(table));
  return add(std::move(n));
}

ExprId GrammarBuilder::dfa(std::shared_ptr<const DfaTable> table, std::vector<ExprId> exits) {
  if (table->edges.empty()) return nothing_;
  Node n{Node::kDfa, {}, std::move(exits)};
  n.dfa = std::move(table);
  return add(std::move(n));
}

int GrammarBuilder::new_rule(std::string name) {
  rules_.push_back({std::move(name), -1});
  return static_cast<int>(rules_.size() - 1);
}

void GrammarBuilder::define(int rule, ExprId body) {
  rules_[static_cast<size_t>(rule)].body = body;
}

std::vector<uint32_t> completion_distances(const Grammar& g) {
  // d[s] = the least, over the states c of s's closure, of: 0 where c ends its rule; 1 + d[t] for a byte
  // edge c -> t; d[start of the called rule] + d[c's return state] for a call. Every candidate is at least
  // each distance it is made of, so Knuth's generalization of Dijkstra's algorithm finds the least fixed
  // point with each dependency followed once: values leave the queue in increasing order, final when they
  // do. (A relaxation until nothing changed took a pass per rule of a call chain running against the state
  // order: 3 000 optional properties took 24 s.)
  const size_t n = g.states.size();
  constexpr uint32_t kCallDependency = 1u << 31;  // state numbers stay below it (kMaxGrammarStates)
  // Reverse dependencies, in compressed rows: the states whose closure holds a state; the states with a
  // byte edge into a state or a call that starts or returns at it.
  struct Rows {
    std::vector<uint32_t> begin, heads;  // row r: heads[begin[r] .. begin[r + 1])
  };
  auto rows = [n](auto&& each_pair) {
    Rows r;
    r.begin.assign(n + 1, 0);
    each_pair([&](uint32_t from, uint32_t) { ++r.begin[from + 1]; });
    for (size_t i = 0; i < n; ++i) r.begin[i + 1] += r.begin[i];
    r.heads.resize(r.begin[n]);
    std::vector<uint32_t> fill(r.begin.begin(), r.begin.end() - 1);
    each_pair([&](uint32_t from, uint32_t head) { r.heads[fill[from]++] = head; });
    return r;
  };
  const Rows in_closure = rows([&](auto&& add) {
    for (uint32_t s = 0; s < n; ++s) {
      for (uint32_t k = g.states[s].closure_begin; k < g.states[s].closure_end; ++k) add(g.closure[k], s);
    }
  });
  const Rows used_by = rows([&](auto&& add) {
    for (uint32_t c = 0; c < n; ++c) {
      const Grammar::State& st = g.states[c];
      for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) add(g.edges[e].to, c);
      if (st.call_rule >= 0) {
        add(g.rule_start[static_cast<size_t>(st.call_rule)], c | kCallDependency);
        add(st.call_next, c | kCallDependency);
      }
    }
  });
  // The queue holds (value << 32 | node): node s is the distance d[s], node c | kMember the value e[c] of
  // state c as a member of closures.
  constexpr uint32_t kMember = 1u << 31;
  std::vector<uint32_t> d(n, kNoCompletion), e(n, kNoCompletion);
  std::vector<uint8_t> done(n, 0), e_done(n, 0);
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> queue;
  auto offer_e = [&](uint32_t c, uint64_t v) {
    if (v < e[c]) {
      e[c] = static_cast<uint32_t>(v);
      queue.push(v << 32 | c | kMember);
    }
  };
  for (uint32_t c = 0; c < n; ++c) {
    if (g.states[c].final) offer_e(c, 0);
  }
  while (!queue.empty()) {
    const uint64_t top = queue.top();
    queue.pop();
    const uint32_t v = static_cast<uint32_t>(top >> 32), node = static_cast<uint32_t>(top);
    if (node & kMember) {
      const uint32_t c = node & ~kMember;
      if (e_done[c] || v != e[c]) continue;
      e_done[c] = 1;
      for (uint32_t k = in_closure.begin[c]; k < in_closure.begin[c + 1]; ++k) {
        const uint32_t s = in_closure.heads[k];
        if (v < d[s]) {
          d[s] = v;
          queue.push((top & ~uint64_t{0xFFFFFFFF}) | s);
        }
      }
      continue;
    }
    if (done[node] || v != d[node]) continue;
    done[node] = 1;
    for (uint32_t k = used_by.begin[node]; k < used_by.begin[node + 1]; ++k) {
      const uint32_t head = used_by.heads[k];
      if (!(head & kCallDependency)) {
        offer_e(head, uint64_t{v} + 1);  // a byte edge into `node`
        continue;
      }
      const uint32_t c = head & ~kCallDependency;
      const Grammar::State& st = g.states[c];
      const uint32_t start = g.rule_start[static_cast<size_t>(st.call_rule)];
      if (done[start] && done[st.call_next]) offer_e(c, uint64_t{d[start]} + d[st.call_next]);
    }
  }
  return d;
}

namespace {

// Steps: states visited plus epsilon edges read. 2.5x the most a schema of the structured-output benchmark
// takes (13.2M: cityjson, 1.9M states); at most 128 MiB of closure entries and about half a second.
constexpr size_t kMaxClosureVisits = size_t{1} << 25;

class Compiler {
 public:
  Compiler(const GrammarBuilder& b, size_t max_states)
      : b_(b), max_states_(std::min<size_t>(max_states, kMaxGrammarStates)) {}

  Grammar run(int root) {
    count_states(root);
    std::vector<int> todo{root};
    g_.root_rule = local_rule(root);
    while (!todo.empty()) {
      const int r = todo.back();
      todo.pop_back();
      pending_calls_.clear();
      auto [s, e] = build(body_of(r));
      g_.states[e].final = true;
      g_.rule_start[local_.at(r)] = s;
      for (int callee : pending_calls_) todo.push_back(callee);
    }
    // Byte edges to their final arrays; epsilon closures.
    std::vector<Grammar::Edge> edges;
    for (uint32_t s = 0; s < g_.states.size(); ++s) {
      g_.states[s].edges_begin = static_cast<uint32_t>(edges.size());
      for (const Grammar::Edge& e : byte_edges_[s]) edges.push_back(e);
      g_.states[s].edges_end = static_cast<uint32_t>(edges.size());
    }
    g_.edges = std::move(edges);
    std::vector<ByteEdges>().swap(byte_edges_);
    // The epsilon edges in compressed rows and one flag per state, read by the closures below: a step
    // through lists of lists and 36-byte states took ~36 ns, so a 20-byte regex whose closures reach the
    // bound ((.*a*.*.*){200}) held a core for 1.2 s before it was refused.
    const size_t n = g_.states.size();
    std::vector<uint32_t> eps_begin(n + 1, 0), eps_to;
    std::vector<uint8_t> significant(n);
    for (size_t s = 0; s < n; ++s) {
      eps_begin[s] = static_cast<uint32_t>(eps_to.size());
      eps_to.insert(eps_to.end(), eps_[s].begin(), eps_[s].end());
      const Grammar::State& st = g_.states[s];
      significant[s] = st.edges_end > st.edges_begin || st.call_rule >= 0 || st.final;
    }
    eps_begin[n] = static_cast<uint32_t>(eps_to.size());
    std::vector<std::vector<uint32_t>>().swap(eps_);
    std::vector<uint32_t> mark(n, UINT32_MAX);
    std::vector<uint32_t> stack;
    // Closures grow with the square of a run of optional parts (each `.*` of `.*.*...` reaches every one
    // after it: 8 KB of them were 600M entries, 4 GB): bounded like the states.
    size_t visits = 0;
    for (uint32_t s = 0; s < n; ++s) {
      g_.states[s].closure_begin = static_cast<uint32_t>(g_.closure.size());
      stack.assign(1, s);
      mark[s] = s;
      while (!stack.empty()) {
        const uint32_t t = stack.back();
        stack.pop_back();
        visits += 1 + eps_begin[t + 1] - eps_begin[t];
        if (visits > kMaxClosureVisits) {
          throw Error("grammar too large: its epsilon closures take more than " +
                      std::to_string(kMaxClosureVisits) + " steps");
        }
        if (significant[t]) g_.closure.push_back(t);
        for (uint32_t e = eps_begin[t]; e < eps_begin[t + 1]; ++e) {
          const uint32_t u = eps_to[e];
          if (mark[u] != s) {
            mark[u] = s;
            stack.push_back(u);
          }
        }
      }
      g_.states[s].closure_end = static_cast<uint32_t>(g_.closure.size());
    }
    prune_dead_edges();
    share_return_states();
    for (Grammar::State& st : g_.states) {
      if (st.call_rule < 0) continue;
      const Grammar::State& next = g_.states[st.call_next];
      if (next.closure_end - next.closure_begin != 1) continue;
      const Grammar::State& only = g_.states[g_.closure[next.closure_begin]];
      st.tail_call = only.final && only.call_rule < 0 && only.edges_end == only.edges_begin;
    }
    return std::move(g_);
  }

 private:
  using ByteEdges = std::vector<Grammar::Edge>;

  ExprId body_of(int rule) const {
    const GrammarBuilder::Rule& r = b_.rules()[static_cast<size_t>(rule)];
    if (r.body < 0) throw Error("grammar rule '" + r.name + "' is not defined");
    return r.body;
  }

  // A frame holds the state its call returns to, and a return reads nothing of that state but its closure:
  // calls whose continuations have the same closure (every "leave the trie" branch of a property-name trie
  // resumes at the name's end) return to one of them, so the configurations after them are equal and the
  // matcher's cached transitions and masks serve them all.
  void share_return_states() {
    std::map<std::vector<uint32_t>, uint32_t> by_closure;
    std::vector<uint32_t> key;
    for (Grammar::State& st : g_.states) {
      if (st.call_rule < 0) continue;
      const Grammar::State& next = g_.states[st.call_next];
      key.assign(g_.closure.begin() + next.closure_begin, g_.closure.begin() + next.closure_end);
      std::sort(key.begin(), key.end());
      st.call_next = by_closure.emplace(key, st.call_next).first->second;
    }
  }

  // Byte edges into states that can never reach the end of their rule (an unsatisfiable branch: an object
  // needing more properties than it may have, a call of a rule that cannot end) are dropped, so no accepted
  // prefix is a dead end: the model is never led into text it cannot finish.
  void prune_dead_edges() {
    const std::vector<uint32_t> d = completion_distances(g_);
    std::vector<Grammar::Edge> kept;
    kept.reserve(g_.edges.size());
    for (Grammar::State& st : g_.states) {
      const uint32_t begin = static_cast<uint32_t>(kept.size());
      for (uint32_t e = st.edges_begin; e < st.edges_end; ++e) {
        if (d[g_.edges[e].to] < kNoCompletion) kept.push_back(g_.edges[e]);
      }
      st.edges_begin = begin;
      st.edges_end = static_cast<uint32_t>(kept.size());
    }
    g_.edges = std::move(kept);
  }

  // The grammar numbers the rules it compiles in the order it meets them (the root is 0): a builder
  // shared by a large schema holds tens of thousands of rules, and each small automaton compiled from it
  // (a pattern intersected with a length or a patternProperties name) sized its tables by all of them.
  // A rule met for the first time is queued (pending_calls_, after the body that called it).
  uint32_t local_rule(int rule) {
    const auto [it, added] = local_.emplace(rule, static_cast<uint32_t>(g_.rule_start.size()));
    if (added) {
      g_.rule_start.push_back(UINT32_MAX);
      g_.rule_names.push_back(b_.rules()[static_cast<size_t>(rule)].name);
      pending_calls_.push_back(rule);
    }
    return it->second;
  }

  // The states build() makes for the rules reachable from `root`, counted exactly before any is made
  // and refused past the bound (an enum of 1 000 copies of a 120-deep object built 2M states, 1.2 GB and
  // 5 s, before new_state refused). Each expression is counted once, each use of it added (build makes
  // a copy per use); counts saturate just past the bound.
  void count_states(int root) {
    count_seen_rules_ = {root};
    std::vector<int> todo{root};
    size_t total = 0;
    while (!todo.empty()) {
      const int r = todo.back();
      todo.pop_back();
      total = saturating_add(total, count_states_of(body_of(r), todo));
      if (total > max_states_) {
        throw Error("grammar too large: more than " + std::to_string(max_states_) + " automaton states");
      }
    }
    std::unordered_map<ExprId, size_t>().swap(counted_);
    std::unordered_set<int>().swap(count_seen_rules_);
  }

  size_t saturating_add(size_t a, size_t b) const { return std::min(max_states_ + 1, a + b); }

  // The states build(e) makes; a rule called for the first time is queued on `todo`.
  size_t count_states_of(ExprId e, std::vector<int>& todo) {
    if (const auto it = counted_.find(e); it != counted_.end()) return it->second;
    const GrammarBuilder::Node& n = b_.node(e);
    size_t c = 0;
    switch (n.kind) {
      case GrammarBuilder::Node::kEmpty:
        c = 1;
        break;
      case GrammarBuilder::Node::kCall:
        if (count_seen_rules_.insert(n.rule).second) todo.push_back(n.rule);
        c = 2;
        break;
      case GrammarBuilder::Node::kNothing:
      case GrammarBuilder::Node::kBytes:
        c = 2;
        break;
      case GrammarBuilder::Node::kSeq:
        for (ExprId k : n.kids) c = saturating_add(c, count_states_of(k, todo));
        break;
      case GrammarBuilder::Node::kAlt:
        c = 2;
        for (ExprId k : n.kids) c = saturating_add(c, count_states_of(k, todo));
        break;
      case GrammarBuilder::Node::kDfa:
        c = saturating_add(n.dfa->edges.size(), 1);
        for (ExprId k : n.kids) c = saturating_add(c, count_states_of(k, todo));
        break;
      case GrammarBuilder::Node::kRepeat: {
        const size_t kid = count_states_of(n.kids[0], todo), cap = max_states_ + 1;
        const auto times = [&](size_t copies) { return kid && copies > cap / kid ? cap : copies * kid; };
        c = saturating_add(1, times(static_cast<size_t>(n.min)));
        c = saturating_add(c, n.max == kUnbounded
                                  ? saturating_add(1, kid)
                                  : saturating_add(1, times(static_cast<size_t>(n.max - n.min))));
        break;
      }
    }
    counted_.emplace(e, c);
    return c;
  }

  uint32_t new_state() {
    // Not reached: count_states refused first ("built" tells the two apart in the tests).
    if (g_.states.size() >= max_states_) {
      throw Error("grammar too large: more than " + std::to_string(max_states_) + " automaton states built");
    }
    g_.states.emplace_back();
    eps_.emplace_back();
    byte_edges_.emplace_back();
    return static_cast<uint32_t>(g_.states.size() - 1);
  }

  std::pair<uint32_t, uint32_t> build(ExprId e) {
    const GrammarBuilder::Node& n = b_.node(e);
    switch (n.kind) {
      case GrammarBuilder::Node::kEmpty: {
        const uint32_t s = new_state();
        return {s, s};
      }
      case GrammarBuilder::Node::kNothing: {
        const uint32_t s = new_state();
        return {s, new_state()};
      }
      case GrammarBuilder::Node::kBytes: {
        const uint32_t s = new_state(), t = new_state();
        for (ByteRange r : n.ranges) byte_edges_[s].push_back({r.lo, r.hi, t});
        return {s, t};
      }
      case GrammarBuilder::Node::kCall: {
        const uint32_t s = new_state(), t = new_state();
        g_.states[s].call_rule = static_cast<int32_t>(local_rule(n.rule));
        g_.states[s].call_next = t;
        return {s, t};
      }
      case GrammarBuilder::Node::kSeq: {
        auto [s, cur] = build(n.kids[0]);
        for (size_t i = 1; i < n.kids.size(); ++i) {
          auto [ks, ke] = build(n.kids[i]);
          eps_[cur].push_back(ks);
          cur = ke;
        }
        return {s, cur};
      }
      case GrammarBuilder::Node::kAlt: {
        const uint32_t s = new_state(), t = new_state();
        for (ExprId k : n.kids) {
          auto [ks, ke] = build(k);
          eps_[s].push_back(ks);
          eps_[ke].push_back(t);
        }
        return {s, t};
      }
      case GrammarBuilder::Node::kDfa: {
        const DfaTable& d = *n.dfa;
        std::vector<uint32_t> at(d.edges.size());
        for (uint32_t& a : at) a = new_state();
        const uint32_t t = new_state();
        std::vector<std::pair<uint32_t, uint32_t>> exits;
        for (ExprId k : n.kids) exits.push_back(build(k));
        for (auto [ks, ke] : exits) eps_[ke].push_back(t);
        for (size_t q = 0; q < d.edges.size(); ++q) {
          for (const DfaTable::Edge& e : d.edges[q]) byte_edges_[at[q]].push_back({e.lo, e.hi, at[e.to]});
          if (d.exit[q] >= 0) eps_[at[q]].push_back(exits[static_cast<size_t>(d.exit[q])].first);
          if (q < d.plain.size()) g_.states[at[q]].plain_remaining = d.plain[q];
        }
        return {at[0], t};
      }
      case GrammarBuilder::Node::kRepeat: {
        const uint32_t s = new_state();
        uint32_t cur = s;
        for (int i = 0; i < n.min; ++i) {
          auto [ks, ke] = build(n.kids[0]);
          eps_[cur].push_back(ks);
          cur = ke;
        }
        if (n.max == kUnbounded) {
          const uint32_t loop = new_state();
          eps_[cur].push_back(loop);
          auto [ks, ke] = build(n.kids[0]);
          eps_[loop].push_back(ks);
          eps_[ke].push_back(loop);
          return {s, loop};
        }
        const uint32_t t = new_state();
        for (int i = n.min; i < n.max; ++i) {
          eps_[cur].push_back(t);
          auto [ks, ke] = build(n.kids[0]);
          eps_[cur].push_back(ks);
          cur = ke;
        }
        eps_[cur].push_back(t);
        return {s, t};
      }
    }
    return {0, 0};
  }

  const GrammarBuilder& b_;
  size_t max_states_;
  Grammar g_;
  std::vector<std::vector<uint32_t>> eps_;
  std::vector<ByteEdges> byte_edges_;
  std::vector<int> pending_calls_;
  std::unordered_map<int, uint32_t> local_;     // builder rule -> this grammar's rule number
  std::unordered_map<ExprId, size_t> counted_;  // count_states: expression -> states its build makes
  std::unordered_set<int> count_seen_rules_;    // count_states: rules already queued
};

}  // namespace

Grammar compile_grammar(const GrammarBuilder& builder, int root, size_t max_states) {
  return Compiler(builder, max_states).run(root);
}

}  // namespace spark::grammar
