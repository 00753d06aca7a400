// spark-tokenizer-bench: encode throughput of our tokenizer (MB/s, median of N runs) on a text built
// from the tokenizer corpus. bench/tokenizer_bench.py runs it next to Hugging Face's `tokenizers`.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "spark/error.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

// About `megabytes` of text: the corpus lines over and over, each round in a different order and
// with its own round number, so the text is not one block repeated.
std::string build_text(double megabytes) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(spark::synthetic_tokenizer_corpus())};
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) lines.push_back(l);
  }
  std::string text;
  const auto target = static_cast<size_t>(megabytes * 1e6);
  uint64_t state = 12345;
  for (int round = 0; text.size() < target; ++round) {
    for (size_t i = lines.size() - 1; i > 0; --i) {  // Fisher-Yates with a fixed LCG
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      std::swap(lines[i], lines[(state >> 33) % (i + 1)]);
    }
    for (const auto& l : lines) {
      text += l;
      text += " (" + std::to_string(round) + ")\n";
    }
  }
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer encode throughput"};
  std::string model, text_file, write_text;
  double megabytes = 4;
  int runs = 5;
  app.add_option("--model", model, "Folder with tokenizer.json (or vocab.json + merges.txt)");
  app.add_option("--text", text_file, "Text to encode (default: built from the corpus)");
  app.add_option("--mb", megabytes, "Size of the built text in MB");
  app.add_option("--write-text", write_text, "Only write the built text to this file");
  app.add_option("--runs", runs, "Timed runs (the median is reported)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  try {
    std::string text;
    if (!text_file.empty()) {
      std::ifstream f(text_file, std::ios::binary);
      if (!f) throw spark::Error(text_file + ": cannot read");
      std::stringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    } else {
      text = build_text(megabytes);
    }
    if (!write_text.empty()) {
      std::ofstream(write_text, std::ios::binary) << text;
      return 0;
    }
    if (model.empty()) throw spark::Error("--model is required");
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l + "\n");

    // Each run gets a fresh tokenizer, so the word cache starts cold every time, as in the reference run.
    std::vector<double> whole_mb_s, lines_mb_s;
    size_t ids_whole = 0, ids_lines = 0;
    const double mb = static_cast<double>(text.size()) / 1e6;
    for (int r = 0; r < runs; ++r) {
      {
        const auto tok = spark::Tokenizer::from_model_dir(model);
        const auto t0 = std::chrono::steady_clock::now();
        ids_whole = tok.encode(text).size();
        whole_mb_s.push_back(mb / seconds_since(t0));
      }
      {
        const auto tok = spark::Tokenizer::from_model_dir(model);
        std::vector<int32_t> ids;
        size_t n = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (const auto& l : lines) {
          ids.clear();
          tok.encode(l, ids);
          n += ids.size();
        }
        lines_mb_s.push_back(mb / seconds_since(t0));
        ids_lines = n;
      }
    }
    const nlohmann::json out = {{"bytes", text.size()},
                                {"lines", lines.size()},
                                {"ids_whole", ids_whole},
                                {"ids_lines", ids_lines},
                                {"whole_mb_s", whole_mb_s},
                                {"lines_mb_s", lines_mb_s},
                                {"whole_median_mb_s", median(whole_mb_s)},
                                {"lines_median_mb_s", median(lines_mb_s)}};
    std::printf("%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
