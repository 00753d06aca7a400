#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

namespace spark {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A CSV field, quoted where it holds a comma or a quote (a kernel path with ", KV bf16").
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string mib(int64_t bytes) { return fmt("%.0f", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

}  // namespace

std::string format_markdown(const std::vector<BenchRow>& rows, const std::string& model_desc) {
  const bool ceilings =
      std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) { return r.ceiling_tokens_per_s > 0; });
  std::string out = "| model | quant | kernels | threads | test | t/s median | min | max |";
  out += ceilings ? " ceiling t/s | of ceiling |\n" : "\n";
  out += ceilings ? "|---|---|---|---:|---|---:|---:|---:|---:|---:|\n"
                  : "|---|---|---|---:|---|---:|---:|---:|\n";
  for (const auto& r : rows) {
    out += "| " + model_desc + " | " + r.quant + " | " + r.kernel_path + " | " + std::to_string(r.threads) +
           " | " + r.test + " | " + fmt("%.2f", r.tokens_per_s_median) + " | " +
           fmt("%.2f", r.tokens_per_s_min) + " | " + fmt("%.2f", r.tokens_per_s_max) + " |";
    if (ceilings && r.ceiling_tokens_per_s > 0) {
      out += " " + fmt("%.1f", r.ceiling_tokens_per_s) + " (" + r.ceiling_basis + ") | " +
             fmt("%.0f%%", 100.0 * r.tokens_per_s_median / r.ceiling_tokens_per_s) + " |";
    } else if (ceilings) {
      out += " | |";
    }
    out += "\n";
  }
  if (!rows.empty()) {
    const BenchRow& r = rows.front();
    out += "\nload " + fmt("%.2f", r.load_s) + " s; RssAnon settled " + mib(r.rss_anon_settled_bytes) + " MiB, peak " +
           mib(r.rss_anon_peak_bytes) + " MiB during load; commit " + r.commit + "\n";
  }
  return out;
}

std::string format_json(const std::vector<BenchRow>& rows) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    arr.push_back({{"test", r.test},
                   {"quant", r.quant},
                   {"kernel_path", r.kernel_path},
                   {"threads", r.threads},
                   {"n_prompt", r.n_prompt},
                   {"n_gen", r.n_gen},
                   {"concurrency", r.concurrency},
                   {"tokens_per_s_median", r.tokens_per_s_median},
                   {"tokens_per_s_min", r.tokens_per_s_min},
                   {"tokens_per_s_max", r.tokens_per_s_max},
                   {"load_s", r.load_s},
                   {"rss_anon_settled_bytes", r.rss_anon_settled_bytes},
                   {"rss_anon_peak_bytes", r.rss_anon_peak_bytes},
                   {"kv_bytes", r.kv_bytes},
                   {"commit", r.commit}});
    if (r.ceiling_tokens_per_s > 0) {
      arr.back()["ceiling_tokens_per_s"] = r.ceiling_tokens_per_s;
      arr.back()["ceiling_basis"] = r.ceiling_basis;
      arr.back()["of_ceiling"] = r.tokens_per_s_median / r.ceiling_tokens_per_s;
    }
  }
  return arr.dump(2) + "\n";
}

std::string format_csv(const std::vector<BenchRow>& rows) {
  std::string out =
      "test,quant,kernel_path,threads,n_prompt,n_gen,concurrency,tokens_per_s_median,tokens_per_s_min,"
      "tokens_per_s_max,load_s,rss_anon_settled_bytes,rss_anon_peak_bytes,kv_bytes,commit,ceiling_tokens_per_"
      "s,"
      "of_ceiling\n";
  for (const auto& r : rows) {
    out += csv_field(r.test) + "," + csv_field(r.quant) + "," + csv_field(r.kernel_path) + "," +
           std::to_string(r.threads) + "," + std::to_string(r.n_prompt) + "," + std::to_string(r.n_gen) +
           "," + std::to_string(r.concurrency) + "," + fmt("%.4f", r.tokens_per_s_median) + "," +
           fmt("%.4f", r.tokens_per_s_min) + "," + fmt("%.4f", r.tokens_per_s_max) + "," +
           fmt("%.3f", r.load_s) + "," + std::to_string(r.rss_anon_settled_bytes) + "," +
           std::to_string(r.rss_anon_peak_bytes) + "," + std::to_string(r.kv_bytes) + "," +
           csv_field(r.commit) + "," +
           (r.ceiling_tokens_per_s > 0 ? fmt("%.4f", r.ceiling_tokens_per_s) + "," +
                                             fmt("%.4f", r.tokens_per_s_median / r.ceiling_tokens_per_s)
                                       : std::string(",")) +
           "\n";
  }
  return out;
}

std::string plot_svg(const std::vector<BenchRow>& rows, const std::string& title) {
  // Series: one line per (quant, threads) over concurrency; if no concurrency rows, pp/tg over threads.
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  bool conc = std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) { return r.test.rfind("conc", 0) == 0; });
  for (const auto& r : rows) {
    if (conc && r.test.rfind("conc", 0) == 0) {
      series[r.quant + " t" + std::to_string(r.threads)].emplace_back(r.concurrency, r.tokens_per_s_median);
    } else if (!conc) {
      series[r.quant + " " + r.test].emplace_back(r.threads, r.tokens_per_s_median);
    }
  }
  const double w = 720, h = 440, left = 70, right = 170, top = 40, bottom = 60;
  double xmax = 1, ymax = 1;
  for (auto& [_, pts] : series) {
    std::sort(pts.begin(), pts.end());
    for (auto& [x, y] : pts) {
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  }
  ymax *= 1.1;
  // Concurrency doubles: a log2 x axis spaces 1, 2, 4 ... evenly.
  auto xpos = [&](double x) {
    const double t = conc ? std::log2(std::max(1.0, x)) / std::max(1.0, std::log2(xmax)) : (x - 1) / std::max(1.0, xmax - 1);
    return left + t * (w - left - right);
  };
  auto ypos = [&](double y) { return top + (1 - y / ymax) * (h - top - bottom); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", w) + "\" height=\"" + fmt("%.0f", h) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + fmt("%.0f", w / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + title + "</text>\n";
  s += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.0f", h - bottom) + "\" x2=\"" + fmt("%.0f", w - right) +
       "\" y2=\"" + fmt("%.0f", h - bottom) + "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.0f", top) + "\" x2=\"" + fmt("%.0f", left) + "\" y2=\"" +
       fmt("%.0f", h - bottom) + "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double y = ymax * i / 5;
    s += "<text x=\"" + fmt("%.0f", left - 6) + "\" y=\"" + fmt("%.1f", ypos(y) + 4) + "\" text-anchor=\"end\">" +
         fmt("%.1f", y) + "</text>\n";
    s += "<line x1=\"" + fmt("%.0f", left) + "\" y1=\"" + fmt("%.1f", ypos(y)) + "\" x2=\"" + fmt("%.0f", w - right) +
         "\" y2=\"" + fmt("%.1f", ypos(y)) + "\" stroke=\"#ddd\"/>\n";
  }
  std::vector<double> xs;
  for (auto& [_, pts] : series) {
    for (auto& p : pts) xs.push_back(p.first);
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs) {
    s += "<text x=\"" + fmt("%.1f", xpos(x)) + "\" y=\"" + fmt("%.0f", h - bottom + 18) + "\" text-anchor=\"middle\">" +
         fmt("%.0f", x) + "</text>\n";
  }
  s += "<text x=\"" + fmt("%.0f", (left + w - right) / 2) + "\" y=\"" + fmt("%.0f", h - 18) + "\" text-anchor=\"middle\">" +
       (conc ? "concurrent sequences" : "threads") + "</text>\n";
  s += "<text transform=\"rotate(-90)\" x=\"" + fmt("%.0f", -(top + h - bottom) / 2) +
       "\" y=\"18\" text-anchor=\"middle\">tokens/s</text>\n";
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};
  size_t k = 0;
  for (auto& [name, pts] : series) {
    const char* c = colors[k % 7];
    std::string path;
    for (auto& [x, y] : pts) path += (path.empty() ? "" : " ") + fmt("%.1f", xpos(x)) + "," + fmt("%.1f", ypos(y));
    s += "<polyline fill=\"none\" stroke=\"" + std::string(c) + "\" stroke-width=\"2\" points=\"" + path + "\"/>\n";
    for (auto& [x, y] : pts) {
      s += "<circle cx=\"" + fmt("%.1f", xpos(x)) + "\" cy=\"" + fmt("%.1f", ypos(y)) + "\" r=\"3\" fill=\"" + c + "\"/>\n";
    }
    s += "<text x=\"" + fmt("%.0f", w - right + 10) + "\" y=\"" + fmt("%.0f", top + 16 * static_cast<double>(k)) +
         "\" fill=\"" + c + "\">" + name + "</text>\n";
    ++k;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace spark
