// A grammar over bytes: rules whose bodies are expressions (byte sets, sequences, alternatives, bounded
// repetitions and calls of other rules, so recursion is allowed), compiled to one automaton per rule
// (Thompson construction, epsilon closures precomputed). GrammarMatcher runs it as a pushdown automaton.
// The JSON Schema and regex compilers build their grammars with GrammarBuilder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spark::grammar {

using ExprId = int32_t;
inline constexpr int kUnbounded = -1;

struct ByteRange {
  uint8_t lo, hi;
};

// A deterministic automaton over bytes, embedded in a grammar: its states' byte edges, and per state the
// index of the exit expression that may follow there (-1: none). Built by product_dfa (grammar/product.h).
struct DfaTable {
  struct Edge {
    uint8_t lo, hi;
    uint32_t to;
  };
  std::vector<std::vector<Edge>> edges;  // per state; state 0 starts
  std::vector<int32_t> exit;             // per state
  // Optional, per state: r >= 0 when a token of c plain characters (see TokenVocab::plain_chars) is accepted
  // from the state exactly when c <= r, ending inside the automaton (counted string characters); -1 else.
  std::vector<int32_t> plain;
};

// The heap bytes a table holds (its edge lists, exits and plain-text counts).
size_t dfa_table_bytes(const DfaTable& table);

class GrammarBuilder {
 public:
  GrammarBuilder();
  ExprId empty() const { return empty_; }
  ExprId nothing() const { return nothing_; }   // matches no input at all
  ExprId bytes(std::vector<ByteRange> ranges);  // one byte from the set
  ExprId byte(uint8_t b) { return bytes({{b, b}}); }
  ExprId literal(std::string_view text);
  // One UTF-8 encoded code point in [lo, hi] (surrogates excluded).
  ExprId codepoints(uint32_t lo, uint32_t hi);
  ExprId seq(std::vector<ExprId> parts);
  ExprId alt(std::vector<ExprId> options);
  ExprId repeat(ExprId e, int min, int max);  // max kUnbounded for no limit
  ExprId optional(ExprId e) { return repeat(e, 0, 1); }
  ExprId call(int rule);
  // The automaton, then at a state with an exit, that exit's expression (exits[exit]).
  ExprId dfa(DfaTable table, std::vector<ExprId> exits);
  ExprId dfa(std::shared_ptr<const DfaTable> table, std::vector<ExprId> exits);

  int new_rule(std::string name);
  void define(int rule, ExprId body);
  size_t rule_count() const { return rules_.size(); }
  size_t node_count() const { return nodes_.size(); }
  bool defined(int rule) const { return rules_[static_cast<size_t>(rule)].body >= 0; }

  // Intersections (product_dfa) built for this grammar charge their steps here: each is bounded alone,
  // and this bounds them together (a schema of 20 000 strings with a pattern and a maxLength each built
  // 20 000 of them: 48 s). Throws spark::Error past the bound.
  void charge_intersection_work(size_t steps);
  size_t intersection_work() const { return intersection_work_; }

  struct Node {
    enum Kind : uint8_t { kEmpty, kNothing, kBytes, kSeq, kAlt, kRepeat, kCall, kDfa } kind;
    std::vector<ByteRange> ranges;
    std::vector<ExprId> kids;
    int min = 0, max = 0, rule = -1;
    std::shared_ptr<const DfaTable> dfa = nullptr;  // kDfa: kids are its exits
  };
  struct Rule {
    std::string name;
    ExprId body = -1;
  };
  const Node& node(ExprId e) const { return nodes_[static_cast<size_t>(e)]; }
  const std::vector<Rule>& rules() const { return rules_; }

 private:
  ExprId add(Node n);
  std::vector<Node> nodes_;
  std::unordered_multimap<uint64_t, ExprId> interned_;  // node hash -> node
  std::vector<Rule> rules_;
  ExprId empty_, nothing_;
  size_t intersection_work_ = 0;
};

// The compiled automaton. States are global across rules; a call edge enters another rule's start state and
// resumes at `next` once that rule reaches its final state. A state's byte edges may lead to different
// states (embedded DFAs); Thompson states have one target.
struct Grammar {
  struct Edge {
    uint8_t lo, hi;
    uint32_t to;
  };
  struct State {
    uint32_t edges_begin = 0, edges_end = 0;  // byte edges, into `edges`
    int32_t call_rule = -1;                   // a call state: enter call_rule, then continue at call_next
    uint32_t call_next = 0;
    bool final = false;            // the end of its rule
    bool tail_call = false;        // nothing but the rule's end follows the call: no frame needed
    int32_t plain_remaining = -1;  // DfaTable::plain of the state it was built from
    uint32_t closure_begin = 0,
             closure_end = 0;  // significant states reachable by epsilon moves, into `closure`
  };
  std::vector<State> states;
  std::vector<Edge> edges;
  std::vector<uint32_t> closure;
  // Per rule compiled, numbered in the order the compile met them (not the builder's numbers): its start
  // state and name. call_rule and root_rule are such numbers.
  std::vector<uint32_t> rule_start;
  std::vector<std::string> rule_names;
  uint32_t root_rule = 0;

  // Whether a state consumes bytes / calls / ends its rule (the states kept in closures).
  bool consumes(uint32_t s) const { return states[s].edges_end > states[s].edges_begin; }
  // The state after byte b, or -1.
  int64_t next(uint32_t s, uint8_t b) const {
    for (uint32_t e = states[s].edges_begin; e < states[s].edges_end; ++e) {
      if (b >= edges[e].lo && b <= edges[e].hi) return edges[e].to;
    }
    return -1;
  }
};

// The heap bytes a compiled grammar holds.
size_t grammar_bytes(const Grammar& grammar);

// Per state, the fewest bytes that take it to the end of its rule (calls included), or kNoCompletion.
inline constexpr uint32_t kNoCompletion = UINT32_MAX / 4;
std::vector<uint32_t> completion_distances(const Grammar& grammar);

// States are numbered in 31 bits.
inline constexpr size_t kMaxGrammarStates = size_t{1} << 31;

// Compiles `root` and every rule reachable from it. Throws spark::Error when an undefined rule is called or
// the automaton would exceed `max_states`.
Grammar compile_grammar(const GrammarBuilder& builder, int root, size_t max_states = 2'000'000);

}  // namespace spark::grammar
