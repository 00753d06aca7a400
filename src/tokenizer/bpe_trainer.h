// A small deterministic byte-level BPE trainer for the tokenizers of generated checkpoints: the classic
// algorithm (repeatedly merge the most frequent adjacent pair, weighted by word counts) with
// incremental pair counts and a lazy max-heap, so training on tens of KB takes milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace spark {

struct BpeMerge {
  std::string left;  // raw bytes
  std::string right;
};

// Returns merges in rank order that create exactly `new_tokens` distinct tokens beyond the 256 bytes.
// `words` are pre-tokenized pieces (raw bytes) with their counts. Ties go to the pair whose tokens were
// created first. No merge creates a token listed in `forbidden` (e.g. the bytes of an added token).
// When the words offer no more pairs, the rest are filler merges of existing tokens (enumerated in a
// fixed order), so any vocabulary size can be reached.
std::vector<BpeMerge> train_bpe(const std::vector<std::pair<std::string, int64_t>>& words, size_t new_tokens,
                                const std::unordered_set<std::string>& forbidden = {});

}  // namespace spark
