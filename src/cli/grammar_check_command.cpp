#include "cli/grammar_check_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "spark/error.h"
#include "tokenizer/tokenizer.h"
#include "util/bounded_json.h"

namespace spark {

namespace {

struct GrammarCheckOptions {
  std::string tokenizer_dir;
  std::string cases;
  bool summary = false;
  bool cpu_time = false;
};

using Clock = std::chrono::steady_clock;

// Microseconds now: wall clock, or with cpu_time this thread's CPU time (on a shared, loaded machine the
// wall clock's tails measure the other processes).
int64_t now_us(bool cpu_time) {
  if (cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  }
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

std::shared_ptr<const grammar::TokenVocab> vocab_of(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.contains(id) && !tok.is_special(id))
      bytes[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
  }
  return std::make_shared<const grammar::TokenVocab>(std::move(bytes), std::vector<int32_t>{});
}

double percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return static_cast<double>(v[i]);
}

int run(const GrammarCheckOptions& o) {
  const Tokenizer tok = Tokenizer::from_model_dir(o.tokenizer_dir);
  const auto vocab = vocab_of(tok);
  std::ifstream in(o.cases, std::ios::binary);
  if (!in) throw Error(o.cases + ": cannot read");
  size_t cases = 0, compiled = 0, passing = 0, valid_rejected = 0, invalid_accepted = 0, tests_total = 0;
  std::vector<int64_t> mask_us, compile_us, peak_work, memory_kib;
  std::string line;
  size_t line_no = 0;
  std::vector<uint64_t> bits;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json c;
    try {
      c = parse_json_bounded<nlohmann::ordered_json>(line);
    } catch (const std::exception& e) {
      throw Error(o.cases + ":" + std::to_string(line_no) + ": not JSON: " + e.what());
    }
    if (!c.is_object() || !c.contains("schema") || !c.contains("tests") || !c["tests"].is_array()) {
      throw Error(o.cases + ":" + std::to_string(line_no) +
                  ": expected {\"id\", \"schema\", \"tests\": [...]}");
    }
    ++cases;
    nlohmann::ordered_json out;
    out["id"] = c.value("id", nlohmann::ordered_json());
    std::shared_ptr<const grammar::CompiledGrammar> g;
    const int64_t t0 = now_us(o.cpu_time);
    try {
      g = std::make_shared<const grammar::CompiledGrammar>(grammar::compile_json_schema(c["schema"].dump()),
                                                           vocab);
    } catch (const std::exception& e) {
      out["compile_error"] = e.what();
    }
    const int64_t cu = now_us(o.cpu_time) - t0;
    out["compile_us"] = cu;
    out["tests"] = nlohmann::ordered_json::array();
    bool pass = g != nullptr;
    if (g) {
      ++compiled;
      compile_us.push_back(cu);
      for (const auto& t : c["tests"]) {
        ++tests_total;
        const std::string text = t.value("text", "");
        const bool valid = t.value("valid", false);
        nlohmann::ordered_json r;
        std::vector<int32_t> ids;
        bool accepted = true;
        try {
          ids = tok.encode(text);
        } catch (const std::exception&) {
          accepted = false;  // not UTF-8: no token sequence spells it
        }
        grammar::GrammarMatcher m(g);
        nlohmann::ordered_json times = nlohmann::ordered_json::array();
        for (int32_t id : ids) {
          if (!accepted) break;
          const int64_t m0 = now_us(o.cpu_time);
          m.fill_mask(bits);
          const int64_t us = now_us(o.cpu_time) - m0;
          times.push_back(us);
          mask_us.push_back(us);
          const bool allowed = (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
          if (!allowed || !m.accept_token(id)) accepted = false;
        }
        const bool complete = accepted && m.can_end();
        r["accepted"] = accepted;
        r["complete"] = complete;
        r["tokens"] = ids.size();
        r["mask_us"] = std::move(times);
        out["tests"].push_back(std::move(r));
        if (valid && !complete) {
          ++valid_rejected;
          pass = false;
        }
        if (!valid && complete) {
          ++invalid_accepted;
          pass = false;
        }
      }
    }
    if (g) {
      // The most work one mask took (the bound the server enforces: grammar/matcher.h, WorkMeter).
      out["peak_work"] = g->peak_work();
      peak_work.push_back(static_cast<int64_t>(g->peak_work()));
      // What the server's grammar cache would count for it now, its mask caches grown by the tests.
      const size_t memory = g->memory_bytes();
      out["memory_bytes"] = memory;
      memory_kib.push_back(static_cast<int64_t>(memory >> 10));
    }
    if (pass) ++passing;
    const std::string s = out.dump();
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (o.summary) {
    auto pct = [](size_t a, size_t b) {
      return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    std::fprintf(stderr,
                 "| cases | compiled | passing | validation errors | invalidation errors | tests |\n");
    std::fprintf(stderr, "|---|---|---|---|---|---|\n");
    std::fprintf(stderr, "| %zu | %zu (%.1f%%) | %zu (%.1f%%) | %zu | %zu | %zu |\n\n", cases, compiled,
                 pct(compiled, cases), passing, pct(passing, cases), valid_rejected, invalid_accepted,
                 tests_total);
    std::fprintf(stderr, "| time | p50 | p90 | p99 | max | count |\n|---|---|---|---|---|---|\n");
    std::vector<int64_t> m = mask_us, cm = compile_us;
    std::fprintf(stderr, "| mask (us) | %.0f | %.0f | %.0f | %.0f | %zu |\n", percentile(m, 0.5),
                 percentile(m, 0.9), percentile(m, 0.99), percentile(m, 1.0), m.size());
    std::fprintf(stderr, "| compile (us) | %.0f | %.0f | %.0f | %.0f | %zu |\n", percentile(cm, 0.5),
                 percentile(cm, 0.9), percentile(cm, 0.99), percentile(cm, 1.0), cm.size());
    std::vector<int64_t> pw = peak_work;
    std::fprintf(stderr, "| peak work per case (steps; limit %llu) | %.0f | %.0f | %.0f | %.0f | %zu |\n",
                 static_cast<unsigned long long>(grammar::kDefaultWorkLimit), percentile(pw, 0.5),
                 percentile(pw, 0.9), percentile(pw, 0.99), percentile(pw, 1.0), pw.size());
    std::vector<int64_t> kib = memory_kib;
    std::fprintf(stderr, "| grammar memory after its tests (KiB) | %.0f | %.0f | %.0f | %.0f | %zu |\n",
                 percentile(kib, 0.5), percentile(kib, 0.9), percentile(kib, 0.99), percentile(kib, 1.0),
                 kib.size());
  }
  return 0;
}

}  // namespace

void add_grammar_check_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GrammarCheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "grammar-check",
      "Check JSON Schema cases (MaskBench JSON lines) against the grammar engine, timing masks");
  cmd->add_option("--tokenizer", o->tokenizer_dir, "Folder with the tokenizer (tokenizer.json)")->required();
  cmd->add_option("cases", o->cases, "JSON lines: {\"id\", \"schema\", \"tests\": [{\"text\", \"valid\"}]}")
      ->required();
  cmd->add_flag("--cpu-time", o->cpu_time,
                "Time in this thread's CPU time instead of wall clock (for a shared, loaded machine)");
  cmd->add_flag("--summary", o->summary,
                "Print a summary table (passing, errors, mask/compile percentiles) to stderr");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace spark
