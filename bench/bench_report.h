// Result rows of spark-bench and their output formats (markdown table, JSON array, CSV, SVG plot).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spark {

struct BenchRow {
  std::string test;  // "pp512", "tg128", "conc8", ...
  std::string quant;
  std::string kernel_path;
  int threads = 0;
  int n_prompt = 0;
  int n_gen = 0;
  int concurrency = 1;
  double tokens_per_s_median = 0;
  double tokens_per_s_min = 0;
  double tokens_per_s_max = 0;
  double load_s = 0;
  int64_t rss_anon_settled_bytes = 0;
  int64_t rss_anon_peak_bytes = 0;
  int64_t kv_bytes = 0;
  std::string commit;
  // spark-bench --of-ceiling: what this test can reach on the machine (0: not measured, or a concurrency
  // row), and what it was derived from ("read 69 GB/s", "int8 dot 1776 G/s").
  double ceiling_tokens_per_s = 0;
  std::string ceiling_basis;
};

std::string format_markdown(const std::vector<BenchRow>& rows, const std::string& model_desc);
std::string format_json(const std::vector<BenchRow>& rows);
std::string format_csv(const std::vector<BenchRow>& rows);
// tokens/s against concurrency (when the rows have concurrency tests) or against threads.
std::string plot_svg(const std::vector<BenchRow>& rows, const std::string& title);

}  // namespace spark
