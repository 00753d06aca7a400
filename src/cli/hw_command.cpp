#include "cli/hw_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "gemm/path_report.h"

namespace spark {

namespace {

nlohmann::ordered_json report_json(const kernels::HardwareReport& r) {
  const kernels::CpuFeatures& f = r.features;
  nlohmann::ordered_json j;
  j["cpu"] = f.brand;
  j["features"] = nlohmann::ordered_json::object();
  for (const kernels::CpuFeatureField& field : kernels::cpu_feature_fields())
    j["features"][field.name] = f.*field.member;
  j["best_tier"] = kernels::isa_name(r.best);
  j["active_tier"] = kernels::isa_name(r.active);
  j["paths"] = nlohmann::ordered_json::array();
  for (const auto& p : r.paths) {
    j["paths"].push_back({{"class", p.gemm_class},
                          {"m", p.m},
                          {"n", p.n},
                          {"k", p.k},
                          {"format", kernels::weight_format_name(p.format)},
                          {"bf16_activations", p.bf16_activations},
                          {"bits_per_weight", kernels::bits_per_weight(p.format, p.n, p.k)},
                          {"kernel", p.kernel},
                          {"reason", p.reason}});
  }
  j["suggested_formats"] = nlohmann::ordered_json::array();
  for (const auto& a : r.advice) {
    j["suggested_formats"].push_back(
        {{"use", a.use}, {"format", kernels::weight_format_name(a.format)}, {"reason", a.reason}});
  }
  return j;
}

}  // namespace

void add_hw_command(CLI::App& app, int& exit_code) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("hw", "Print the hardware probe and the kernel each GEMM uses, and why");
  cmd->add_flag("--json", *json, "Print one JSON object instead of text");
  cmd->callback([json, &exit_code] {
    const kernels::HardwareReport r = kernels::hardware_report();
    const std::string text = *json ? report_json(r).dump(2) + "\n" : kernels::format_hardware_report(r);
    std::fputs(text.c_str(), stdout);
    exit_code = 0;
  });
}

}  // namespace spark
