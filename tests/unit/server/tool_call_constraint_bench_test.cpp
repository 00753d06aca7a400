// How long the per-step mask takes over a vocabulary of the real size (131072 tokens, synthetic texts shaped
// like a byte-level BPE vocabulary). Reports times (printed and as test properties); asserts only that the
// masks are right, never a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "constraint_test_util.h"
#include "parser_test_util.h"
#include "server/tool_call_constraint.h"

namespace spark {

namespace {

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  }
  out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

std::vector<std::string> bpe_like_vocab(size_t size) {
  std::vector<std::string> texts = test::small_vocab_texts();  // end token, bytes, tags, boundary cases
  std::mt19937_64 rng(99);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto word = [&](size_t min_len, size_t max_len) {
    std::string w;
    const size_t len = min_len + pick(max_len - min_len + 1);
    for (size_t i = 0; i < len; ++i) w += static_cast<char>('a' + pick(26));
    return w;
  };
  const std::string punct = "{}[]()<>\"':,.;!?-_=+*/\\#@&|`~";
  while (texts.size() < size) {
    const size_t kind = pick(100);
    std::string t;
    if (kind < 40) {
      t.append(1, ' ').append(word(2, 10));
    } else if (kind < 60) {
      t = word(2, 8);
    } else if (kind < 68) {
      const bool space = pick(2) != 0;
      if (space) t.append(1, ' ');
      t.append(word(2, 9));
      t[space ? 1 : 0] = static_cast<char>(t[space ? 1 : 0] - 32);
    } else if (kind < 76) {
      for (size_t i = 0, n = 1 + pick(3); i < n; ++i) t += utf8(0x4E00 + static_cast<uint32_t>(pick(0x51A6)));
    } else if (kind < 80) {
      t = std::to_string(pick(1000));
    } else if (kind < 88) {
      for (size_t i = 0, n = 1 + pick(4); i < n; ++i) t += punct[pick(punct.size())];
    } else if (kind < 94) {
      const std::string c = utf8(0x4E00 + static_cast<uint32_t>(pick(0x51A6)));  // a piece of a character
      t = pick(2) ? c.substr(0, 1 + pick(2)) : c.substr(1 + pick(2));
    } else {
      if (pick(2)) {
        t.append(1 + pick(8), ' ');
      } else {
        t.append(1, '\n').append(pick(9), ' ');
      }
    }
    texts.push_back(t);
  }
  return texts;
}

struct Timing {
  double median_ms;
  double max_ms;
  size_t allowed;
};

Timing time_mask(const ToolCallConstraint& constraint, std::vector<uint8_t>& mask, int reps) {
  std::vector<double> ms;
  size_t allowed = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    allowed = constraint.allowed_tokens(mask);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back(), allowed};
}

void feed(ToolCallConstraint& constraint, const std::string& text) {
  for (char c : text) constraint.accept(1 + static_cast<uint8_t>(c));  // tokens 1..256 are the bytes
}

}  // namespace

TEST(ToolCallConstraintBench, MaskTimeOverA131072TokenVocabulary) {
  const auto build_start = std::chrono::steady_clock::now();
  auto vocab = std::make_shared<const ConstraintVocab>(bpe_like_vocab(131072), std::vector<int32_t>{0});
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start).count();
  ASSERT_EQ(vocab->size(), 131072u);
  std::printf("vocab: %zu tokens, trie %zu nodes, built in %.1f ms\n", vocab->size(),
              vocab->all().node_count(), build_ms);
  RecordProperty("vocab_build_ms", std::to_string(build_ms));

  const nlohmann::json tools = test::test_tools();
  struct Case {
    const char* name;
    std::string forced;
    std::string prefix;
  };
  const std::vector<Case> cases = {
      {"start", "", ""},
      {"tool_name", "", "<tool_call>get_"},
      {"param_key", "get_weather", "<tool_call>get_weather<arg_key>"},
      {"raw_string", "type_text", "<tool_call>type_text<arg_key>text</arg_key><arg_value>Hello there"},
      {"raw_string_mid_char", "type_text", "<tool_call>type_text<arg_key>text</arg_key><arg_value>caf\xc3"},
      {"json_string", "set_alarm", "<tool_call>set_alarm<arg_key>labels</arg_key><arg_value>[\"wo"},
      {"integer", "tap", "<tool_call>tap<arg_key>index</arg_key><arg_value>12"},
      {"after_value", "get_weather",
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value>"},
  };
  std::vector<uint8_t> mask;
  for (const Case& c : cases) {
    ToolCallConstraint constraint(vocab, tools, c.forced);
    feed(constraint, c.prefix);
    const Timing t = time_mask(constraint, mask, 15);
    std::printf("%-20s allowed %6zu  median %.3f ms  max %.3f ms\n", c.name, t.allowed, t.median_ms,
                t.max_ms);
    RecordProperty(std::string(c.name) + "_median_ms", std::to_string(t.median_ms));
    // Spot-check the mask against the reference on a sample of tokens.
    for (size_t id = 0; id < vocab->size(); id += 97) {
      ASSERT_EQ(mask[id] != 0, constraint.allows(static_cast<int32_t>(id))) << c.name << " token " << id;
    }
  }

  // A whole constrained generation, choosing uniformly among allowed tokens.
  std::vector<double> step_ms;
  std::mt19937_64 rng(5);
  ToolCallConstraint constraint(vocab, tools);
  std::string text;
  while (!constraint.ended() && step_ms.size() < 5000) {
    const auto start = std::chrono::steady_clock::now();
    const size_t count = constraint.allowed_tokens(mask);
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    ASSERT_GT(count, 0u);
    size_t pick = rng() % count;
    int32_t token = 0;
    for (size_t id = 0; id < mask.size(); ++id) {
      if (mask[id] && pick-- == 0) {
        token = static_cast<int32_t>(id);
        break;
      }
    }
    constraint.accept(token);
    if (!vocab->is_end(token)) text += vocab->text(token);
  }
  ASSERT_TRUE(constraint.ended());
  const test::ToolRun run = test::run_tools(tools, true, {text});
  EXPECT_EQ(run.message.tool_calls.size(), 1u) << text;
  EXPECT_TRUE(run.recoveries.empty()) << text;
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf("random generation: %zu steps, median %.3f ms, max %.3f ms per step\n", sorted.size(),
              sorted[sorted.size() / 2], sorted.back());
  RecordProperty("generation_steps", std::to_string(sorted.size()));
  RecordProperty("generation_step_median_ms", std::to_string(sorted[sorted.size() / 2]));
  RecordProperty("generation_step_max_ms", std::to_string(sorted.back()));
}

}  // namespace spark
