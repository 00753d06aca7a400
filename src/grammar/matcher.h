// Runs a compiled Grammar over bytes as a pushdown automaton, and computes token masks over a vocabulary.
//
// The matcher's configuration is a set of heads, each an automaton state with a call stack; stacks share
// their tails (frames with parent links), so ambiguity costs one head per live alternative, never
// backtracking. A token mask comes from walking a byte trie of the vocabulary with the heads: a subtree
// whose prefix the grammar rejects is pruned, so the work follows what is allowed. Per grammar and state the
// walk is done once without the stack ("context-independent": the tokens the state accepts without returning
// from its rule, plus the trie nodes where a return happens); at each step only those nodes' subtrees are
// walked again with the real stack. Head sets are interned as states of a lazy DFA whose byte transitions
// are computed once per grammar, so a walk costs a table lookup per trie node.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace spark::grammar {

// The nonzero words of a bit set when they are few: ORing those beats ORing all 2,048 words of a 131k
// vocabulary (most states allow a few hundred tokens). `all` when there are many.
struct NonzeroWords {
  std::vector<uint32_t> index;
  bool all = true;
};

// The tokens a grammar state accepts without returning from its rule, and the trie nodes where it may
// return (to be walked with the real stack), in the vocabulary's full trie or, for a state with
// plain_remaining, in its trie of the tokens that are not plain text.
struct StateMask {
  // The mask, or when bits_words.all is false only its nonzero words, in bits_words.index order (end_bits
  // alike with end_words).
  std::vector<uint64_t> bits;
  std::vector<uint32_t> cd_nodes;
  // The tokens after which the state's rule has just ended (empty when none): with nothing on the stack
  // (the grammar's end), bits | end_bits is the whole mask, and cd_nodes need no walk.
  std::vector<uint64_t> end_bits;
  bool other_trie = false;  // cd_nodes index the trie of the non-plain tokens (other_trie())
  NonzeroWords bits_words, end_words;
};

// A byte trie of tokens numbered in depth-first order (a subtree is a contiguous node range).
struct TokenTrie {
  struct Node {
    uint32_t edges_begin, edges_end;    // children, in byte order
    uint32_t tokens_begin, tokens_end;  // tokens whose bytes end here
    uint32_t subtree_end;               // nodes [this, subtree_end) are this node's subtree
    uint32_t parent;
    uint8_t byte;  // the byte on the edge from the parent
    uint8_t depth;
  };
  std::vector<Node> nodes;
  std::vector<uint32_t> children;
  std::vector<int32_t> tokens;
};

// The tokenizer's vocabulary as bytes, in a trie. Built once per tokenizer and shared.
class TokenVocab {
 public:
  // token_bytes[id]: what the token decodes to; empty for tokens that may never be chosen (special tokens).
  // end_ids: tokens that end generation, allowed exactly when the grammar can end.
  TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }

  using Node = TokenTrie::Node;
  // The token spelling exactly byte b, or -1.
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }
  const TokenTrie& trie() const { return trie_; }
  const std::vector<Node>& nodes() const { return trie_.nodes; }
  const std::vector<uint32_t>& children() const { return trie_.children; }
  const std::vector<int32_t>& tokens() const { return trie_.tokens; }

  // Plain text: characters a JSON string holds unescaped (0x20-0x7F but `"` and `\`, well-formed UTF-8
  // code points from U+0080). The number of such characters a token spells (a well-formed start of one at
  // its end counting as one), or -1 when it spells anything else (a quote, an escape, a control byte,
  // ill-formed UTF-8, a character's continuation bytes at its start).
  int32_t plain_chars(int32_t id) const { return plain_chars_[static_cast<size_t>(id)]; }
  // The trie of the tokens that are not plain text.
  const TokenTrie& other_trie() const { return other_trie_; }
  // Whether the bytes down to a node of trie() are plain text ending on a character boundary: then a token
  // below it is plain text exactly when the rest of its bytes are.
  bool plain_path(uint32_t node) const { return plain_path_[node] != 0; }
  // The plain-text tokens below a node of trie() (the node's own included).
  std::span<const int32_t> plain_below(uint32_t node) const {
    return {plain_dfs_.data() + plain_before_[node],
            plain_dfs_.data() + plain_before_[trie_.nodes[node].subtree_end]};
  }
  // The node of other_trie() with the same bytes as a node of trie() (kNoNode when no token that is not
  // plain text goes through it), and back.
  static constexpr uint32_t kNoNode = UINT32_MAX;
  uint32_t other_node(uint32_t node) const { return full_to_other_[node]; }
  const std::vector<uint32_t>& other_to_full() const { return other_to_full_; }
  // As bits, the plain-text tokens that start with a plain ASCII character or a UTF-8 lead byte (every
  // plain-text token but the empty ones): ORed a word at a time when most of them reach free text.
  const std::vector<uint64_t>& plain_from_root() const { return plain_from_root_; }
  // The plain-text tokens of at most `chars` characters (shared, computed once per count).
  std::shared_ptr<const std::vector<uint64_t>> plain_upto(int32_t chars) const;
  // The fewest tokens whose bytes, in order, spell `text` exactly (empty when none can, or text is empty).
  std::vector<int32_t> fewest_tokens(std::string_view text) const;

  // State masks shared by every grammar on this vocabulary, keyed by the structure they depend on (the
  // automaton reachable from the state, canonically numbered): a plain string's contents are walked once per
  // process, not once per property and schema.
  std::shared_ptr<const StateMask> shared_mask(const std::string& signature) const;
  void share_mask(const std::string& signature, std::shared_ptr<const StateMask> mask) const;

 private:
  mutable std::mutex shared_mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const StateMask>> shared_;
  mutable std::unordered_map<int32_t, std::shared_ptr<const std::vector<uint64_t>>> plain_upto_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  TokenTrie trie_, other_trie_;
  std::vector<int32_t> plain_chars_;
  int32_t max_plain_chars_ = 0;
  std::vector<uint8_t> plain_path_;
  std::vector<uint32_t> plain_before_;  // per trie() node: plain-text tokens at the nodes before it
  std::vector<int32_t> plain_dfs_;      // plain-text tokens in trie() order
  std::vector<uint32_t> full_to_other_, other_to_full_;
  std::vector<uint64_t> plain_from_root_;
  int32_t byte_token_[256];
};

struct Frame {
  uint32_t ret;     // state to resume at
  uint32_t parent;  // frame below; frame 0 is the bottom
};
struct Head {
  uint32_t state;
  uint32_t frame;
};

// The work behind one mask or one accepted token: closure entries expanded and trie nodes stepped. Past
// the limit the grammar is refused with spark::Error instead of computed: the engine waits for every mask
// of a step, so one costly grammar would stall every sequence. 2^25 is about a second of one core (a
// step costs 20-30 ns) and 80x the most any schema of the structured-output benchmark took for one mask
// (`spark-server grammar-check --summary`, "peak work").
inline constexpr uint64_t kDefaultWorkLimit = uint64_t{1} << 25;

struct WorkMeter {
  uint64_t used = 0;
  uint64_t limit = kDefaultWorkLimit;
  void charge(uint64_t n) {
    used += n;
    if (used > limit) over();
  }
  [[noreturn]] void over() const;
};

// A grammar prepared for one vocabulary, with its per-state mask cache. Thread-safe; shared by all matchers
// of the same schema.
class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab,
                  uint64_t work_limit = kDefaultWorkLimit);
  const Grammar& grammar() const { return grammar_; }
  uint64_t work_limit() const { return work_limit_; }
  // The most work one computing pass (a first mask, a budget check) has taken so far.
  uint64_t peak_work() const;
  const TokenVocab& vocab() const { return *vocab_; }

  using StateMask = grammar::StateMask;
  // The tokens the heads allow next (ORed into bits, sized to the vocabulary), end tokens aside. The
  // grammar's caches are shared by every matcher of the grammar: when they hold every head's masks (the
  // usual step) it reads them under a shared lock, so matchers of one schema fill in parallel; a first
  // visit computes under the exclusive lock.
  void fill(const std::vector<Head>& heads, const std::vector<Frame>& frames,
            std::vector<uint64_t>& bits) const;
  ~CompiledGrammar();
  struct Walks;
  // Clears the tokens of `bits` after which the grammar can no longer end within `bytes` bytes (end tokens
  // stay as they are); one trie walk over cached transitions. Returns the number left.
  size_t keep_within(const std::vector<Head>& heads, const std::vector<Frame>& frames,
                     std::vector<uint64_t>& bits, uint32_t bytes) const;
  // Per state, the fewest bytes that reach the end of its rule (calls included); computed on first use.
  const std::vector<uint32_t>& distances() const;
  // The heap bytes the grammar holds now: its automaton and its caches, which grow as matchers use it (a
  // state mask shared with other grammars through the vocabulary is counted in each). It never waits for
  // a matcher's computation: then the last measure.
  size_t memory_bytes() const;

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  uint64_t work_limit_;
  // Shared: lookups of the caches below; exclusive: anything that inserts into them (or clears them).
  mutable std::shared_mutex mutex_;
  mutable std::unordered_map<uint32_t, std::shared_ptr<const StateMask>> masks_;
  mutable std::vector<uint32_t> distances_;
  mutable uint64_t peak_work_ = 0;
  mutable std::unique_ptr<Walks> walks_;
  mutable std::atomic<size_t> last_memory_bytes_{0};
  const StateMask& state_mask_locked(uint32_t state) const;
  // ORs the heads' masks into bits. compute false (shared lock held): from the caches alone, false at the
  // first state mask or return walk not cached yet; true (exclusive lock held): makes what is missing.
  bool or_heads(const std::vector<Head>& heads, const std::vector<Frame>& frames, std::vector<uint64_t>& bits,
                bool compute) const;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  // A matcher without a vocabulary (for matching text only).
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Consumes bytes; returns false (and leaves the matcher unchanged) when the grammar rejects them.
  bool advance(std::string_view bytes);
  // Consumes a token (its bytes, or an end token when the grammar can end). False when not allowed.
  bool accept_token(int32_t id);
  // The grammar can end here.
  bool can_end() const { return accepting_; }
  // An end token was accepted.
  bool ended() const { return ended_; }
  // No byte can follow (either ended by the grammar or complete with nothing more allowed).
  bool must_end() const { return heads_.empty(); }

  // bits (resized to the vocabulary, 64 tokens a word): 1 for every token that may come next. Returns the
  // number allowed.
  size_t fill_mask(std::vector<uint64_t>& bits) const;
  // The slow reference: runs the token's bytes through the automaton.
  bool allows_token(int32_t id) const;

  size_t head_count() const { return heads_.size(); }

  // Budget steering. The fewest bytes that complete the grammar from here (0 when it can end now).
  uint32_t min_completion_bytes() const;
  // Narrows `bits` (a fill_mask result) to the steps of a shortest completion: the end tokens when the
  // grammar can end, else the single-byte tokens that start a shortest completion. One token per byte then
  // finishes within min_completion_bytes() + 1 tokens. Returns the number allowed.
  size_t restrict_to_shortest(std::vector<uint64_t>& bits) const;
  // Narrows `bits` to the tokens after which the grammar can still complete within `bytes_after` bytes
  // (one walk of the vocabulary trie with the real stack, as fill_mask's). Returns the number allowed.
  size_t restrict_to_budget(std::vector<uint64_t>& bits, uint32_t bytes_after) const;
  // The bytes of one shortest completion (empty when the grammar can end now).
  std::string shortest_completion() const;
  // That completion in the fewest tokens of the vocabulary: the plan a budget too tight for one token a
  // byte follows (multi-byte tokens such as the tool-call tags make it far shorter than its bytes).
  std::vector<int32_t> shortest_completion_tokens() const;

 private:
  const Grammar& g() const { return *grammar_ptr_; }

  std::shared_ptr<const CompiledGrammar> compiled_;
  std::shared_ptr<const Grammar> grammar_holder_;
  const Grammar* grammar_ptr_;
  std::vector<Head> heads_;
  std::vector<Frame> frames_;
  bool accepting_ = false;
  bool ended_ = false;
};

// Whether `text` is in the grammar's language (full match).
bool grammar_matches(const Grammar& grammar, std::string_view text);

}  // namespace spark::grammar
