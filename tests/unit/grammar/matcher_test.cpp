// Token masks against the slow reference (each token's bytes run through the automaton), on states reached
// by random walks over the allowed tokens; ends, recursion and tokens that split UTF-8 characters.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/product.h"
#include "grammar/regex.h"
#include "spark/error.h"

namespace spark::grammar {
namespace {

constexpr int32_t kEnd = 0;

// Id 0 ends generation; then every single byte, JSON punctuation runs, words, and random strings.
std::shared_ptr<const TokenVocab> test_vocab() {
  std::vector<std::string> t{"<end>"};
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s :
       {"{\"",   "\":",   "\": ",     "\", \"", "\"}",         "\"]",        "\"],",     "}}",      "]}",
        "true",  "false", "null",     "nul",    "12",          "0.",         "e+",       "-1",      "\\u00",
        "\\n",   "\\\"",  "\xC3",     "\xA9\"", "caf\xC3\xA9", "  ",         "\n  ",     " \"",     "\",",
        "v\": ", "kids",  "\"v\": 1", "abc",    "2024-",       "-01",        "T10:",     "Z\"",     "[{",
        "}]",    ", ",    ",\"",      "\"a",    "a\"",         "\"x\": {\"", "\xF0\x9F", "\x98\x80"}) {
    t.push_back(s);
  }
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",: abcvkxyz0123456789.-e\\nu\n";
  for (int i = 0; i < 400; ++i) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) s.push_back(alphabet[rng() % alphabet.size()]);
    t.push_back(s);
  }
  t.push_back("");  // a token with no bytes is never allowed
  return std::make_shared<const TokenVocab>(std::move(t), std::vector<int32_t>{kEnd});
}

bool bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

void random_walks(const std::string& schema, int walks, int steps,
                  std::shared_ptr<const TokenVocab> vocab = test_vocab()) {
  const auto g = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
  std::mt19937 rng(11);
  std::vector<uint64_t> bits;
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    for (int s = 0; s < steps && !m.ended(); ++s) {
      const size_t n = m.fill_mask(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
        const bool fast = bit(bits, id);
        ASSERT_EQ(fast, m.allows_token(id))
            << schema << " token " << id << " '" << vocab->bytes(id) << "' step " << s;
        if (fast) allowed.push_back(id);
      }
      ASSERT_EQ(n, allowed.size());
      ASSERT_FALSE(allowed.empty()) << "dead end in " << schema;  // byte tokens can always continue
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
}

TEST(GrammarMatcher, MaskEqualsSlowReferenceOnRandomStates) {
  random_walks(
      R"({"type": "object", "properties": {"v": {"type": "integer"}, "name": {"type": "string", "maxLength": 6},
                 "tags": {"type": "array", "items": {"enum": ["a", "b", null]}, "maxItems": 3}},
                 "required": ["v"]})",
      12, 40);
  random_walks(
      R"({"anyOf": [{"type": "number", "minimum": -5, "maximum": 50}, {"type": "string", "format": "date"},
                 {"type": "boolean"}]})",
      12, 20);
  random_walks(R"({})", 10, 40);
}

// One vocabulary for several grammars: state masks are shared between grammars by structure (strings,
// numbers, whole values alike), and embedded DFAs (patternProperties, pattern with length) have states
// whose byte edges lead to different states.
TEST(GrammarMatcher, MasksSharedAcrossGrammarsAndDfaStates) {
  const auto vocab = test_vocab();
  for (int round = 0; round < 2; ++round) {
    random_walks(R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}})", 6,
                 30, vocab);
    random_walks(R"({"type": "array", "items": {"type": "string"}})", 6, 30, vocab);
    random_walks(
        R"({"type": "object", "patternProperties": {"^x": {"type": "integer"}, "v$": {"type": "string"}},
                     "additionalProperties": false})",
        8, 30, vocab);
    random_walks(R"({"type": "string", "pattern": "^[a-c0-9]+$", "maxLength": 5, "not": {"enum": ["abc"]}})",
                 8, 10, vocab);
    random_walks(R"({"type": "object", "properties": {"v": {}}, "minProperties": 1, "maxProperties": 2})", 8,
                 30, vocab);
  }
}

// Counted strings (minLength / maxLength) take their plain-text tokens from the vocabulary's table by
// character count and walk only the others: the masks must still equal the slow reference, with tokens of
// several characters, multi-byte characters, partial UTF-8 and quotes inside tokens.
TEST(GrammarMatcher, CountedStringMasksFromCharacterCountTables) {
  std::vector<std::string> t{"<end>"};
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"ab",           "abc",
                        "abcd",         "abcdefgh",
                        "caf\xC3\xA9",  "\xC3\xA9\xC3\xA9",
                        "\xE2\x82\xAC", "\xF0\x9F\x98\x80x",
                        "\xC3",         "ab\xE2\x82",
                        "\xE0\x80",     "abcd\xF0\x9F\x98",
                        "\xA9\"",       "x\"",
                        "xy\"}",        "\\",
                        "\\n",          "a\\\"",
                        "\x7F\x7F",     "\xED\x9F\xBF",
                        "\xED\xA0\x80", "\xC0\x80",
                        "  ",           "\"",
                        "\",\"",        "\": \"",
                        "{\"",          "ab\", \"",
                        "\"}"}) {
    t.push_back(s);
  }
  const auto vocab = std::make_shared<const TokenVocab>(std::move(t), std::vector<int32_t>{kEnd});
  EXPECT_EQ(vocab->plain_chars(1 + 'a'), 1);
  auto plain_of = [&](const std::string& bytes) {
    for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
      if (vocab->bytes(id) == bytes) return vocab->plain_chars(id);
    }
    return -2;  // not in the vocabulary
  };
  EXPECT_EQ(plain_of("caf\xC3\xA9"), 4);
  EXPECT_EQ(plain_of("\xC3"), 1);  // the start of a character
  EXPECT_EQ(plain_of("ab\xE2\x82"), 3);
  EXPECT_EQ(plain_of("\xA9\""), -1);
  EXPECT_EQ(plain_of("\xE0\x80"), -1);      // overlong start
  EXPECT_EQ(plain_of("\xED\xA0\x80"), -1);  // a surrogate
  EXPECT_EQ(plain_of("x\""), -1);
  const std::string schema =
      R"({"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 5},
          "b": {"type": "string", "maxLength": 3}, "c": {"type": "string", "minLength": 3},
          "d": {"type": "array", "items": {"type": "string", "maxLength": 9}}}, "required": ["a", "b"]})";
  const Grammar g = compile_json_schema(schema);
  size_t counted = 0;
  for (const auto& st : g.states) counted += st.plain_remaining >= 0 ? 1 : 0;
  EXPECT_GE(counted, 6u + 4u + 4u + 10u);  // boundaries of a, b, c (3 counted, then any) and d's items
  for (int round = 0; round < 2; ++round) random_walks(schema, 16, 40, vocab);
  random_walks(R"({"type": "string", "maxLength": 2})", 8, 6, vocab);
  random_walks(R"({"type": "string", "minLength": 4})", 8, 12, vocab);
}

// Property names of objects that allow additional properties: a key that leaves the declared names' trie
// is free text (a DFA marked with an unbounded plain_remaining), so the walks of the trie's states take the
// plain-text tokens below such a node from the vocabulary's list and walk only the other ones. Masks at every
// prefix of declared and undeclared names (ASCII and multi-byte, tokens spanning the name's end, quotes and
// escapes inside tokens) must equal the slow reference, on the full trie's states and the real stack.
TEST(GrammarMatcher, FreeTextKeyMasksFromPlainTokenLists) {
  std::vector<std::string> t{"<end>"};
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s :
       {"na",        "name",      "nam",        "names",    "named", "name\"",       "name\": ",
        "x",         "xyz",       "xyzzy",      "xy\"",     "xy\":", "zz",           "q\"",
        "n\xC3\xA9", "\xC3\xA9x", "\xC3\xA9\"", "\xC3",     "\xA9z", "\xE2\x82\xAC", "\xE2\x82",
        "\\",        "\\n",       "a\\u",       "{\"",      "{\"na", "\", \"",       "\"}",
        "\":",       "\": ",      ", \"",       "ab cd",    "  ",    "\": \"",       "\",\"x",
        "n ",        "valu",      "value",      "value\":", "ue",    "\"n",          "\"x"}) {
    t.push_back(s);
  }
  const auto vocab = std::make_shared<const TokenVocab>(std::move(t), std::vector<int32_t>{kEnd});
  auto id_of = [&](const std::string& bytes) {
    for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
      if (vocab->bytes(id) == bytes) return id;
    }
    return -1;
  };
  // The vocabulary's per-node tables: plain paths end on a character boundary.
  const auto& trie = vocab->trie();
  for (uint32_t n = 1; n < trie.nodes.size(); ++n) {
    std::string path;
    for (uint32_t k = n; k != 0; k = trie.nodes[k].parent)
      path.insert(path.begin(), static_cast<char>(trie.nodes[k].byte));
    size_t plain_tokens = 0;
    for (uint32_t k = n; k < trie.nodes[n].subtree_end; ++k) {
      for (uint32_t i = trie.nodes[k].tokens_begin; i < trie.nodes[k].tokens_end; ++i)
        plain_tokens += vocab->plain_chars(trie.tokens[i]) >= 0 ? 1 : 0;
    }
    EXPECT_EQ(vocab->plain_below(n).size(), plain_tokens) << path;
    if (path == "n" || path == "\xC3\xA9") {
      EXPECT_TRUE(vocab->plain_path(n)) << path;
    }
    if (path == "\xC3" || path == "\"" || path == "\xE2\x82") {
      EXPECT_FALSE(vocab->plain_path(n)) << path;
    }
  }
  // The root's bits: exactly the non-empty plain-text tokens.
  {
    const std::vector<uint64_t>& root = vocab->plain_from_root();
    ASSERT_EQ(root.size(), (vocab->size() + 63) / 64);
    size_t from_root = 0;
    for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
      const std::string& b = vocab->bytes(id);
      const bool want = vocab->plain_chars(id) >= 0 && !b.empty();
      EXPECT_EQ(bit(root, id), want) << "token '" << b << "'";
      from_root += want ? 1 : 0;
    }
    EXPECT_GT(from_root, 100u);
  }
  const std::string schema =
      R"({"type": "object", "properties": {"name": {"type": "string"}, "names": {"type": "integer"},
          "n\u00e9": {"type": "boolean"}, "value": {"type": "object", "properties": {"x": {"type": "null"}}}}})";
  const Grammar g = compile_json_schema(schema);
  size_t free_states = 0;
  for (const auto& st : g.states) free_states += st.plain_remaining == INT32_MAX ? 1 : 0;
  EXPECT_GE(free_states, 1u);  // the rest of an undeclared key
  const auto compiled = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
  std::vector<uint64_t> bits;
  for (const char* prefix :
       {"{\"", "{\"n", "{\"na", "{\"nam", "{\"name", "{\"names", "{\"n\xC3\xA9", "{\"x", "{\"xyz",
        "{\"\xC3\xA9", "{\"name\": \"a\", \"", "{\"name\": \"a\", \"v", "{\"name\": \"a\", \"value\": {\"",
        "{\"name\": \"a\", \"value\": {\"y", "{\"name\": \"a\", \"value\": {\"x\": null, \"xy"}) {
    GrammarMatcher m(compiled);
    ASSERT_TRUE(m.advance(prefix)) << prefix;
    const size_t n = m.fill_mask(bits);
    size_t allowed = 0;
    for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
      ASSERT_EQ(bit(bits, id), m.allows_token(id)) << prefix << " token '" << vocab->bytes(id) << "'";
      allowed += m.allows_token(id) ? 1 : 0;
    }
    EXPECT_EQ(n, allowed);
  }
  {
    GrammarMatcher m(compiled);
    ASSERT_TRUE(m.advance("{\"x"));
    m.fill_mask(bits);
    EXPECT_TRUE(bit(bits, id_of("xyzzy")));
    EXPECT_TRUE(bit(bits, id_of("ab cd")));
    EXPECT_TRUE(bit(bits, id_of("xy\":")));
    EXPECT_FALSE(bit(bits, id_of("\\n")));  // escapes never in an undeclared key
  }
  for (int round = 0; round < 2; ++round) random_walks(schema, 24, 40, vocab);
  random_walks(R"({"type": "array", "items": {"type": "object", "properties": {"na": {"type": "integer"}},
                  "additionalProperties": {"type": "string"}}})",
               16, 40, vocab);
}

// Every position of a property-name trie leaves it the same way: the calls into the rest of an undeclared
// key return to one shared state (equal continuations), so the configurations after leaving are equal and
// the walks of the non-plain tokens below the nodes reached in free text (other_trie()) are kept per
// configuration and replayed at the next position. Masks at every prefix of many keys (declared, leaving the
// trie at each position, multi-byte characters, ill-formed bytes, quotes and escapes after them), at the top
// level and inside an array (the real stack), on one warm compiled grammar must equal those of a fresh one
// and the slow reference.
TEST(GrammarMatcher, FreeTextWalksKeptPerConfigurationEqualFreshOnes) {
  std::vector<std::string> t{"<end>"};
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"al",
                        "alpha",
                        "alp",
                        "alphabet",
                        "al\"",
                        "al\":",
                        "be",
                        "beta",
                        "bet\"",
                        "b\xC3\xA9",
                        "\xC3\xA9t",
                        "\xC3\xA9\"",
                        "\xE4\xB8",
                        "\xE4\xB8\xAD",
                        "\xE4\xB8\xADz",
                        "\xE4\xB8\xAD\"",
                        "\xE4\xB8\xAD\":",
                        "\xE4\xB8 p",
                        "\xE4z",
                        "\xC3\xA9\xE4 x",
                        "\xF0\x9F\x98\x80",
                        "\xF0\x9F",
                        "x\"",
                        "x\": ",
                        "x\\n",
                        "xy\n",
                        "q \"",
                        "\", \"",
                        "\"}",
                        "{\"",
                        "{\"al",
                        ": ",
                        "\": 1",
                        "1, \"",
                        "[{\"",
                        "}, {\"",
                        "}]",
                        "  "}) {
    t.push_back(s);
  }
  const auto vocab = std::make_shared<const TokenVocab>(std::move(t), std::vector<int32_t>{kEnd});
  const std::string object = R"({"type": "object", "properties": {"alpha": {"type": "integer"},
      "alphabet": {"type": "integer"}, "beta": {"type": "integer"}, "b\u00e9": {"type": "integer"}},
      "additionalProperties": {"type": "integer"}})";
  // The non-tail calls into the rest of a key (ASCII or not) all return to one state.
  {
    const Grammar g = compile_json_schema(object);
    std::vector<int32_t> rest_rules;
    for (size_t r = 0; r < g.rule_names.size(); ++r) {
      if (g.rule_names[r] == "key-rest" || g.rule_names[r] == "key-nonascii-rest")
        rest_rules.push_back(static_cast<int32_t>(r));
    }
    ASSERT_EQ(rest_rules.size(), 2u);
    std::set<uint32_t> returns;
    size_t calls = 0;
    for (const auto& st : g.states) {
      if (st.tail_call || std::find(rest_rules.begin(), rest_rules.end(), st.call_rule) == rest_rules.end())
        continue;
      ++calls;
      returns.insert(st.call_next);
    }
    EXPECT_GT(calls, 10u);  // two per position of the trie ("alpha", "alphabet", "beta", "bé")
    EXPECT_EQ(returns.size(), 1u);
  }
  const std::string array = R"({"type": "array", "items": )" + object + "}";
  std::vector<uint64_t> warm_bits, fresh_bits;
  for (const auto& [schema, opening] :
       {std::pair<std::string, std::string>{object, "{\""}, {array, "[{\"x\": 1}, {\""}}) {
    const auto warm = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
    for (const char* key :
         {"alphabet", "alphz", "bet", "b\xC3\xA9z", "q\xE4\xB8\xAD", "\xE4\xB8\xADx", "be"}) {
      const std::string k = key;
      for (size_t len = 0; len <= k.size(); ++len) {
        const std::string prefix = opening + k.substr(0, len);
        GrammarMatcher m(warm);
        ASSERT_TRUE(m.advance(prefix)) << prefix;
        const size_t n = m.fill_mask(warm_bits);
        GrammarMatcher f(std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab));
        ASSERT_TRUE(f.advance(prefix));
        f.fill_mask(fresh_bits);
        ASSERT_EQ(warm_bits, fresh_bits) << prefix;
        size_t allowed = 0;
        for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
          ASSERT_EQ(bit(warm_bits, id), m.allows_token(id))
              << prefix << " token '" << vocab->bytes(id) << "'";
          allowed += bit(warm_bits, id) ? 1 : 0;
        }
        EXPECT_EQ(n, allowed);
      }
    }
    random_walks(schema, 12, 30, vocab);
  }
}

// A branch no instance can satisfy is pruned: the mask never offers a prefix that cannot be completed
// (found by the grammar fuzz harness: `{` and whitespace were allowed, then nothing).
TEST(GrammarMatcher, UnsatisfiableBranchesOfferNoDeadEnd) {
  const auto vocab = test_vocab();
  const std::string unsat =
      R"({"type": "object", "additionalProperties": false, "properties": {"a": {}}, "minProperties": 2})";
  std::vector<uint64_t> bits;
  GrammarMatcher none(std::make_shared<const CompiledGrammar>(compile_json_schema(unsat), vocab));
  EXPECT_EQ(none.fill_mask(bits), 0u);
  EXPECT_FALSE(none.advance("{"));
  const auto g = std::make_shared<const CompiledGrammar>(
      compile_json_schema(R"({"anyOf": [)" + unsat + R"(, {"type": "integer"}]})"), vocab);
  GrammarMatcher m(g);
  m.fill_mask(bits);
  EXPECT_FALSE(bit(bits, 1 + '{'));
  EXPECT_TRUE(bit(bits, 1 + '7'));
  random_walks(R"({"type": "array", "items": {"anyOf": [)" + unsat + R"(, {"type": "boolean"}]}})", 6, 20,
               vocab);
}

// Objects with many optional properties, inside an array (their rule returns into the array's): many heads,
// several sharing a state mask, whose return nodes are walked with the real stack once per state and stack
// and then reused. The same token sequence replayed on the same compiled grammar (masks from the caches)
// and on a fresh one must give the same masks, equal to the slow reference.
TEST(GrammarMatcher, MasksOfHeadsMetAgainEqualFreshOnes) {
  const auto vocab = test_vocab();
  const std::string schema = R"({"type": "array", "items": {"type": "object", "properties": {
      "a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}, "d": {"type": "integer"},
      "e": {"type": "number"}, "f": {"type": "string", "maxLength": 3}, "g": {"type": "integer"},
      "h": {"type": "array", "items": {"type": "integer"}}, "i": {"type": "null"}, "j": {"type": "integer"}},
      "additionalProperties": false}})";
  const auto cached = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
  std::mt19937 rng(5);
  std::vector<uint64_t> first, again, fresh;
  for (int walk = 0; walk < 6; ++walk) {
    GrammarMatcher a(cached), b(cached);
    GrammarMatcher c(std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab));
    for (int step = 0; step < 50 && !a.ended(); ++step) {
      a.fill_mask(first);
      b.fill_mask(again);
      c.fill_mask(fresh);
      ASSERT_EQ(first, again) << "walk " << walk << " step " << step;
      ASSERT_EQ(first, fresh) << "walk " << walk << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
        ASSERT_EQ(bit(first, id), a.allows_token(id)) << "token '" << vocab->bytes(id) << "' step " << step;
        if (bit(first, id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(a.accept_token(pick) && b.accept_token(pick) && c.accept_token(pick));
    }
  }
}

// Matchers of one schema fill their masks in parallel (the engine's mask threads): the compiled grammar's
// caches are read under a shared lock and filled under an exclusive one. N threads replaying the same token
// sequences on one fresh compiled grammar (first visits racing, then cached reads) must give exactly the
// masks of a sequential run on another.
TEST(GrammarMatcher, ConcurrentMasksOnOneGrammarEqualSequentialOnes) {
  const auto vocab = test_vocab();
  const std::string schema = R"({"type": "array", "items": {"type": "object", "properties": {
      "name": {"type": "string"}, "v": {"type": "integer"}, "kids": {"type": "array", "items": {"type": "object",
      "properties": {"x": {"type": "boolean"}}}}, "tag": {"type": "string", "maxLength": 4}}}})";
  const auto reference = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> walks;
  std::vector<std::vector<std::vector<uint64_t>>> masks;
  std::vector<uint64_t> bits;
  for (int w = 0; w < 8; ++w) {
    GrammarMatcher m(reference);
    walks.emplace_back();
    masks.emplace_back();
    for (int step = 0; step < 40 && !m.ended(); ++step) {
      m.fill_mask(bits);
      masks.back().push_back(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
        if (bit(bits, id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      walks.back().push_back(allowed[rng() % allowed.size()]);
      ASSERT_TRUE(m.accept_token(walks.back().back()));
    }
  }
  const auto shared = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
  constexpr int kThreads = 4;
  std::atomic<int> mismatches{0}, ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together: first visits race
      std::vector<uint64_t> mine;
      for (int round = 0; round < 2; ++round) {
        for (size_t k = 0; k < walks.size(); ++k) {
          const size_t w = (k + static_cast<size_t>(t)) % walks.size();  // threads start on different walks
          GrammarMatcher m(shared);
          for (size_t step = 0; step < walks[w].size(); ++step) {
            m.fill_mask(mine);
            if (mine != masks[w][step]) mismatches.fetch_add(1);
            if (!m.accept_token(walks[w][step])) mismatches.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(GrammarMatcher, MaskOnRecursiveSchema) {
  random_walks(R"({"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"},
                 "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "required": ["v"],
                 "additionalProperties": false}}, "$ref": "#/$defs/n"})",
               12, 60);
}

TEST(GrammarMatcher, EndTokenOnlyWhenComplete) {
  const auto vocab = test_vocab();
  const auto g =
      std::make_shared<const CompiledGrammar>(compile_json_schema(R"({"type": "integer"})"), vocab);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  m.fill_mask(bits);
  EXPECT_FALSE(bit(bits, kEnd));
  EXPECT_FALSE(m.accept_token(kEnd));
  ASSERT_TRUE(m.advance("12"));
  m.fill_mask(bits);
  EXPECT_TRUE(bit(bits, kEnd));
  EXPECT_TRUE(m.accept_token(kEnd));
  EXPECT_TRUE(m.ended());
  EXPECT_EQ(m.fill_mask(bits), 0u);
}

TEST(GrammarMatcher, RejectedBytesLeaveTheStateAlone) {
  const auto g =
      std::make_shared<const Grammar>(compile_json_schema(R"({"type": "string", "maxLength": 2})"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.advance("\"a"));
  EXPECT_FALSE(m.advance("bc"));  // would be 3 characters
  EXPECT_TRUE(m.advance("b\""));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.must_end());
}

TEST(GrammarMatcher, TokensMaySplitUtf8Characters) {
  const auto vocab = test_vocab();
  const auto g =
      std::make_shared<const CompiledGrammar>(compile_json_schema(R"({"const": "caf\u00e9"})"), vocab);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.advance("\"caf"));
  std::vector<uint64_t> bits;
  m.fill_mask(bits);
  int32_t lead = -1, tail = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
    if (vocab->bytes(id) == "\xC3") lead = id;
    if (vocab->bytes(id) == "\xA9\"") tail = id;
  }
  EXPECT_TRUE(bit(bits, lead));
  ASSERT_TRUE(m.accept_token(lead));
  m.fill_mask(bits);
  EXPECT_TRUE(bit(bits, tail));
  ASSERT_TRUE(m.accept_token(tail));
  EXPECT_TRUE(m.can_end());
}

// A mask that would take more work than the grammar's limit is an error, and the failed walk leaves nothing
// behind: retried (the state masks it finished are kept, so it gets further) until it completes, every mask
// equals the one of the same grammar without a limit. A token whose bytes take more is refused the same way,
// the matcher unchanged.
TEST(GrammarMatcher, WorkPastTheLimitIsAnErrorAndLosesNothing) {
  const auto vocab = test_vocab();
  const std::string pattern = "(.*.*.*.*){6}";  // after one character every one of the 24 loops is a head
  const auto unlimited = std::make_shared<const CompiledGrammar>(regex_grammar(pattern), vocab, UINT64_MAX);
  std::vector<int32_t> walk;
  std::vector<std::vector<uint64_t>> masks;
  {
    GrammarMatcher m(unlimited);
    std::mt19937 rng(9);
    std::vector<uint64_t> bits;
    for (int step = 0; step < 6; ++step) {
      m.fill_mask(bits);
      masks.push_back(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 1; id < static_cast<int32_t>(vocab->size()); ++id) {
        if (bit(bits, id) && vocab->bytes(id).find('\n') == std::string::npos) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      walk.push_back(allowed[rng() % allowed.size()]);
      ASSERT_TRUE(m.accept_token(walk.back()));
    }
  }
  const uint64_t limit = unlimited->peak_work() / 3;
  const auto limited = std::make_shared<const CompiledGrammar>(regex_grammar(pattern), vocab, limit);
  GrammarMatcher m(limited);
  std::vector<uint64_t> bits;
  int failures = 0;
  for (size_t step = 0; step < walk.size(); ++step) {
    bool done = false;
    for (int attempt = 0; attempt < 200 && !done; ++attempt) {
      try {
        m.fill_mask(bits);
        done = true;
      } catch (const Error& e) {
        ++failures;
        ASSERT_NE(std::string(e.what()).find("too costly"), std::string::npos) << e.what();
      }
    }
    ASSERT_TRUE(done) << "step " << step;
    ASSERT_EQ(bits, masks[step]) << "step " << step;
    ASSERT_TRUE(m.accept_token(walk[step]));
  }
  EXPECT_GT(failures, 0);  // the limit did bite
  EXPECT_LE(limited->peak_work(), limit);

  const auto tiny = std::make_shared<const CompiledGrammar>(regex_grammar(pattern), vocab, 50);
  GrammarMatcher t(tiny);  // 24 heads from the start
  const size_t heads = t.head_count();
  int32_t abc = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) {
    if (vocab->bytes(id) == "abc") abc = id;
  }
  ASSERT_GE(abc, 0);
  EXPECT_THROW(t.accept_token(abc), Error);
  EXPECT_EQ(t.head_count(), heads);
  EXPECT_TRUE(GrammarMatcher(unlimited).accept_token(abc));
}

}  // namespace
}  // namespace spark::grammar

namespace spark::grammar {
namespace {

// Budget steering: from any state, following restrict_to_shortest ends the grammar in exactly
// min_completion_bytes() tokens, and the end token is then the only choice.
TEST(GrammarMatcher, LongChainsOfCallsThatReadNothing) {
  // r_i = 'a' + i | r_(i+1) (a tail call), ..., r_1999 = 'z': reaching r_1999's byte from r_0 takes 2 000
  // calls that read nothing (an object's optional properties skip each other this way). A recursion cut
  // at 256 calls refused every byte past it.
  GrammarBuilder b;
  constexpr int kRules = 2000;
  std::vector<int> r;
  for (int i = 0; i < kRules; ++i) r.push_back(b.new_rule("r" + std::to_string(i)));
  for (int i = 0; i + 1 < kRules; ++i)
    b.define(r[i], b.alt({b.seq({b.literal("a"), b.literal(std::to_string(i))}), b.call(r[i + 1])}));
  b.define(r[kRules - 1], b.literal("z"));
  const auto tail = std::make_shared<const Grammar>(compile_grammar(b, r[0]));
  EXPECT_TRUE(grammar_matches(*tail, "a0"));
  EXPECT_TRUE(grammar_matches(*tail, "a1998"));
  EXPECT_TRUE(grammar_matches(*tail, "z"));
  EXPECT_FALSE(grammar_matches(*tail, "a1999"));
  const auto compiled = std::make_shared<const CompiledGrammar>(compile_grammar(b, r[0]), test_vocab());
  EXPECT_EQ(GrammarMatcher(compiled).min_completion_bytes(), 1u);  // 'z'

  // A byte after each call: every call pushes a frame, at most 256 in one step (deeper is taken for
  // unbounded left recursion, below), so a chain of 250 such rules reads "z" and 249 'x'.
  constexpr int kFramed = 250;
  GrammarBuilder c;
  std::vector<int> q;
  for (int i = 0; i < kFramed; ++i) q.push_back(c.new_rule("q" + std::to_string(i)));
  for (int i = 0; i + 1 < kFramed; ++i) c.define(q[i], c.seq({c.call(q[i + 1]), c.literal("x")}));
  c.define(q[kFramed - 1], c.alt({c.literal("z"), c.empty()}));
  const auto framed = std::make_shared<const Grammar>(compile_grammar(c, q[0]));
  EXPECT_TRUE(grammar_matches(*framed, "z" + std::string(kFramed - 1, 'x')));
  EXPECT_TRUE(grammar_matches(*framed, std::string(kFramed - 1, 'x')));
  EXPECT_FALSE(grammar_matches(*framed, "z" + std::string(kFramed - 2, 'x')));
}

TEST(GrammarBuilder, EqualExpressionsAreOneNode) {
  GrammarBuilder b;
  const ExprId x = b.seq({b.literal("ab"), b.repeat(b.bytes({{'0', '9'}}), 0, 3), b.call(b.new_rule("r"))});
  const size_t nodes = b.node_count();
  EXPECT_EQ(b.seq({b.literal("ab"), b.repeat(b.bytes({{'0', '9'}}), 0, 3), b.call(0)}), x);
  EXPECT_EQ(b.alt({x, b.seq({b.literal("ab"), b.repeat(b.bytes({{'0', '9'}}), 0, 3), b.call(0)})}), x);
  EXPECT_EQ(b.node_count(), nodes);
  EXPECT_NE(b.seq({b.literal("ab"), b.repeat(b.bytes({{'0', '9'}}), 0, 4), b.call(0)}), x);
  EXPECT_NE(b.seq({b.literal("ab"), b.repeat(b.bytes({{'0', '8'}}), 0, 3), b.call(0)}), x);
  EXPECT_NE(b.seq({b.literal("ab"), b.repeat(b.bytes({{'0', '9'}}), 0, 3), b.call(b.new_rule("q"))}), x);
}

TEST(GrammarBuilder, NestedSequencesHoldLinearlyManyParts) {
  // v_(d+1) = '[' 20 letters v_d ']': splicing every nested sequence into its parent made level d hold
  // 22 d parts (2.2M for 300 levels, 1.6 MB of copies per value of a large enum).
  GrammarBuilder b;
  ExprId v = b.literal("0");
  constexpr int kDepth = 300;
  for (int d = 0; d < kDepth; ++d)
    v = b.seq({b.byte('['), b.literal("abcdefghijklmnopqrst"), v, b.byte(']')});
  size_t parts = 0;
  for (size_t e = 0; e < b.node_count(); ++e) parts += b.node(static_cast<ExprId>(e)).kids.size();
  EXPECT_LT(parts, 40u * kDepth);
  const int r = b.new_rule("v");
  b.define(r, v);
  std::string text = "0";
  for (int d = 0; d < kDepth; ++d) text = "[abcdefghijklmnopqrst" + text + "]";
  const Grammar g = compile_grammar(b, r);
  EXPECT_TRUE(grammar_matches(g, text));
  EXPECT_FALSE(grammar_matches(g, text.substr(21, text.size() - 22)));
}

TEST(GrammarBuilder, StateBoundCountedExactlyBeforeBuilding) {
  // The states are counted exactly before any is built: a grammar of exactly the bound compiles, and with
  // one state less the count refuses it, not the build; a repeat of a billion copies is refused at once
  // (the count saturates, no overflow).
  GrammarBuilder b;
  const int r = b.new_rule("r");
  const int q = b.new_rule("q");
  b.define(q, b.alt({b.literal("xy"), b.repeat(b.byte('z'), 2, kUnbounded), b.nothing()}));
  // An embedded automaton (a pattern intersected with a length) with an exit, a regex, the empty word.
  const ExprId counted =
      product_dfa(b, {{compile_regex(b, "^[a-c]+$"), true}, {b.repeat(b.bytes({{0, 255}}), 0, 4), true}},
                  [&](const std::vector<bool>& m) { return m[0] && m[1] ? b.literal("!") : b.nothing(); });
  const int never = b.new_rule("never");  // a rule that matches nothing: kNothing compiled
  b.define(never, b.nothing());
  b.define(r,
           b.seq({b.repeat(b.literal("ab"), 1, 3), b.call(q), b.call(q), b.repeat(b.byte('c'), 0, 2), counted,
                  compile_regex(b, "(d|e+)?f{2,3}"), b.alt({b.empty(), b.literal("g"), b.call(never)})}));
  const Grammar g = compile_grammar(b, r);
  EXPECT_TRUE(grammar_matches(g, "abxyzzcab!dff"));
  const size_t states = g.states.size();
  EXPECT_EQ(compile_grammar(b, r, states).states.size(), states);
  try {
    compile_grammar(b, r, states - 1);
    ADD_FAILURE() << "one state over the bound compiled";
  } catch (const Error& e) {
    // From the count (an undercount would be refused by the build, with "built" at the end).
    EXPECT_EQ(std::string(e.what()),
              "grammar too large: more than " + std::to_string(states - 1) + " automaton states");
  }
  const int big = b.new_rule("big");
  b.define(big, b.repeat(b.literal("abc"), 0, 1'000'000'000));
  EXPECT_THROW(compile_grammar(b, big), Error);
}

TEST(GrammarMatcher, RecursionThroughCallsThatReadNothingEnds) {
  // a = a | 'y' (a tail call of itself) and l = l 'x' | 'y' (left recursion: each call pushes a frame, so
  // it is cut after 256 frames a step; l accepts y followed by up to 256 x).
  GrammarBuilder b;
  const int a = b.new_rule("a");
  b.define(a, b.alt({b.call(a), b.literal("y")}));
  const auto self = std::make_shared<const Grammar>(compile_grammar(b, a));
  EXPECT_TRUE(grammar_matches(*self, "y"));
  EXPECT_FALSE(grammar_matches(*self, ""));
  GrammarBuilder c;
  const int l = c.new_rule("l");
  c.define(l, c.alt({c.seq({c.call(l), c.literal("x")}), c.literal("y")}));
  const auto left = std::make_shared<const Grammar>(compile_grammar(c, l));
  EXPECT_TRUE(grammar_matches(*left, "y"));
  EXPECT_TRUE(grammar_matches(*left, "yxxx"));
  EXPECT_TRUE(grammar_matches(*left, "y" + std::string(256, 'x')));
  EXPECT_FALSE(grammar_matches(*left, "x"));
}

TEST(GrammarMatcher, SteersToTheShortestCompletion) {
  const auto vocab = test_vocab();
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "string", "minLength": 2},
      "b": {"type": "array", "items": {"$ref": "#"}, "minItems": 1}, "c": {"enum": ["long-value", 12]}},
      "required": ["a", "c"], "additionalProperties": false})";  // b would make it infinite
  const auto g = std::make_shared<const CompiledGrammar>(compile_json_schema(schema), vocab);
  std::mt19937 rng(5);
  std::vector<uint64_t> bits;
  for (int prefix = 0; prefix < 30; prefix += 3) {
    GrammarMatcher m(g);
    for (int s = 0; s < prefix; ++s) {  // a random start
      m.fill_mask(bits);
      std::vector<int32_t> allowed;
      for (int32_t id = 1; id < static_cast<int32_t>(vocab->size()); ++id) {
        if (bit(bits, id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
    const uint32_t need = m.min_completion_bytes();
    uint32_t used = 0;
    while (!m.can_end()) {
      m.fill_mask(bits);
      ASSERT_GT(m.restrict_to_shortest(bits), 0u);
      int32_t pick = -1;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()) && pick < 0; ++id) {
        if (bit(bits, id)) pick = id;
      }
      ASSERT_EQ(vocab->bytes(pick).size(), 1u);
      ASSERT_TRUE(m.accept_token(pick));
      ++used;
      ASSERT_LE(used, need);
    }
    EXPECT_EQ(used, need);
    m.fill_mask(bits);
    EXPECT_EQ(m.restrict_to_shortest(bits), 1u);
    EXPECT_TRUE(bit(bits, kEnd));
  }
}

}  // namespace
}  // namespace spark::grammar
