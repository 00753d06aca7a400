#include "grammar/product.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "spark/error.h"

namespace spark::grammar {

namespace {

// A part's automaton, determinized lazily: its epsilon-closed state sets get ids (0: the empty set) and
// their transitions per byte class are computed once.
struct Part {
  Grammar g;
  bool required;
  std::map<std::vector<uint32_t>, uint32_t> ids;
  std::vector<std::vector<uint32_t>> sets;
  std::vector<bool> match;
  std::vector<std::vector<int32_t>> next;  // per set, per byte class; -1 unknown
  size_t classes = 0;

  uint32_t intern(std::vector<uint32_t> set) {
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    const auto id = static_cast<uint32_t>(sets.size());
    bool m = false;
    for (uint32_t s : set) m = m || g.states[s].final;
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    match.push_back(m);
    next.emplace_back(classes, -1);
    return id;
  }
  uint32_t start() {
    intern({});
    std::vector<uint32_t> set;
    const Grammar::State& st = g.states[g.rule_start[g.root_rule]];
    for (uint32_t k = st.closure_begin; k < st.closure_end; ++k) set.push_back(g.closure[k]);
    return intern(std::move(set));
  }
  // `work` counts the states and closure entries read.
  uint32_t step(uint32_t id, size_t cls, uint8_t byte, size_t& work) {
    if (next[id][cls] >= 0) return static_cast<uint32_t>(next[id][cls]);
    std::vector<uint32_t> out;
    work += sets[id].size();
    for (uint32_t s : sets[id]) {
      const int64_t t = g.next(s, byte);
      if (t < 0) continue;
      const Grammar::State& ts = g.states[static_cast<size_t>(t)];
      work += ts.closure_end - ts.closure_begin;
      for (uint32_t k = ts.closure_begin; k < ts.closure_end; ++k) out.push_back(g.closure[k]);
    }
    const uint32_t to = intern(std::move(out));
    next[id][cls] = static_cast<int32_t>(to);
    return to;
  }
};

}  // namespace

ExprId product_dfa(GrammarBuilder& b, const std::vector<ProductPart>& parts,
                   const std::function<ExprId(const std::vector<bool>& matched)>& exit_of,
                   size_t max_states) {
  std::vector<Part> ps;
  std::set<uint32_t> cuts{0, 256};  // byte classes: bytes no part's edges tell apart share a class
  for (const ProductPart& p : parts) {
    const int rule = b.new_rule("product-part");
    b.define(rule, p.expr);
    Part part{compile_grammar(b, rule), p.required, {}, {}, {}, {}, 0};
    b.charge_intersection_work(part.g.states.size() + part.g.closure.size());
    for (const Grammar::State& st : part.g.states) {
      if (st.call_rule >= 0) throw Error("grammar: an intersected expression calls a rule");
    }
    for (const Grammar::Edge& e : part.g.edges) {
      cuts.insert(e.lo);
      cuts.insert(static_cast<uint32_t>(e.hi) + 1);
    }
    ps.push_back(std::move(part));
  }
  const std::vector<uint32_t> bounds(cuts.begin(), cuts.end());
  for (Part& p : ps) p.classes = bounds.size() - 1;

  // Each product state steps every part on every byte class, and a part's new step reads its state set:
  // with many parts (3 000 patternProperties: 4.3 s, 6 000: 34 s and 1 GB) the state count grows with the
  // parts too. 14x the most a JSONSchemaBench case takes (1.2M), a second or two.
  constexpr size_t kMaxProductWork = size_t{1} << 24;
  size_t work = 0;
  using Key = std::vector<uint32_t>;  // per part, its set id
  std::map<Key, uint32_t> index;
  std::vector<Key> keys;
  DfaTable table;
  std::map<std::vector<bool>, int32_t> exit_index;
  std::vector<ExprId> exits;
  auto alive = [&](const Key& k) {
    for (size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].required && k[i] == 0) return false;
    }
    return true;
  };
  auto intern = [&](Key k) -> uint32_t {
    auto it = index.find(k);
    if (it != index.end()) return it->second;
    if (keys.size() >= max_states) {
      throw Error("grammar: intersection larger than " + std::to_string(max_states) + " states");
    }
    const auto id = static_cast<uint32_t>(keys.size());
    index.emplace(k, id);
    keys.push_back(std::move(k));
    table.edges.emplace_back();
    table.exit.push_back(-1);
    return id;
  };
  Key start;
  for (Part& p : ps) start.push_back(p.start());
  if (!alive(start)) return b.nothing();
  intern(std::move(start));
  for (uint32_t q = 0; q < keys.size(); ++q) {
    std::vector<bool> matched(ps.size());
    bool all_required = true;
    for (size_t i = 0; i < ps.size(); ++i) {
      matched[i] = ps[i].match[keys[q][i]];
      if (ps[i].required && !matched[i]) all_required = false;
    }
    if (all_required) {
      auto it = exit_index.find(matched);
      if (it == exit_index.end()) {
        const ExprId e = exit_of(matched);
        int32_t ix = -1;
        if (e != b.nothing()) {
          auto same = std::find(exits.begin(), exits.end(), e);
          ix = static_cast<int32_t>(same - exits.begin());
          if (same == exits.end()) exits.push_back(e);
        }
        it = exit_index.emplace(matched, ix).first;
      }
      table.exit[q] = it->second;
    }
    for (size_t c = 0; c + 1 < bounds.size(); ++c) {
      const auto byte = static_cast<uint8_t>(bounds[c]);
      work += ps.size();
      Key next(ps.size());
      for (size_t i = 0; i < ps.size(); ++i) next[i] = ps[i].step(keys[q][i], c, byte, work);
      if (work > kMaxProductWork) {
        throw Error("grammar: intersection of " + std::to_string(ps.size()) + " parts takes more than " +
                    std::to_string(kMaxProductWork) + " steps");
      }
      if (!alive(next)) continue;
      const uint32_t to = intern(std::move(next));
      auto& edges = table.edges[q];
      const auto lo = static_cast<uint8_t>(bounds[c]), hi = static_cast<uint8_t>(bounds[c + 1] - 1);
      if (!edges.empty() && edges.back().to == to && edges.back().hi + 1 == lo) {
        edges.back().hi = hi;
      } else {
        edges.push_back({lo, hi, to});
      }
    }
  }
  b.charge_intersection_work(work);
  // Keep the states from which an exit is reachable.
  const size_t n = keys.size();
  std::vector<std::vector<uint32_t>> into(n);
  for (uint32_t q = 0; q < n; ++q) {
    for (const auto& e : table.edges[q]) into[e.to].push_back(q);
  }
  std::vector<bool> live(n, false);
  std::vector<uint32_t> todo;
  for (uint32_t q = 0; q < n; ++q) {
    if (table.exit[q] >= 0) {
      live[q] = true;
      todo.push_back(q);
    }
  }
  while (!todo.empty()) {
    const uint32_t q = todo.back();
    todo.pop_back();
    for (uint32_t p : into[q]) {
      if (!live[p]) {
        live[p] = true;
        todo.push_back(p);
      }
    }
  }
  if (!live[0]) return b.nothing();
  std::vector<uint32_t> renum(n, UINT32_MAX);
  DfaTable out;
  for (uint32_t q = 0; q < n; ++q) {
    if (!live[q]) continue;
    renum[q] = static_cast<uint32_t>(out.edges.size());
    out.edges.emplace_back();
    out.exit.push_back(table.exit[q]);
  }
  for (uint32_t q = 0; q < n; ++q) {
    if (!live[q]) continue;
    for (const auto& e : table.edges[q]) {
      if (live[e.to]) out.edges[renum[q]].push_back({e.lo, e.hi, renum[e.to]});
    }
  }
  return b.dfa(std::move(out), std::move(exits));
}

}  // namespace spark::grammar
