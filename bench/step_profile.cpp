#include "step_profile.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace spark::bench {

namespace {

struct Stage {
  const char* tap;     // the tap that ends the stage (SparkModel::forward)
  const char* label;   // stages with the same label share a section
  bool counts = true;  // false: a second tap right after the section's own (no call of its own)
  // Weights the stage reads, by the ending of their linear_weights() names (nullptr: none).
  const char* weights[2] = {nullptr, nullptr};
};

// In forward()'s order: 13 taps a layer, and three outside the layers. The bench loop between two steps
// and the start of forward() come before the first tap, so they are charged to the embedding. A step that
// computes no logits (a prefill chunk of kNone) ends before the last two.
constexpr Stage kStages[] = {
    {"embed", "embedding lookup, step start"},
    {"attn_norm", "input RMSNorm"},
    {"qkv", "q_k_v_proj", true, {".self_attn.q_k_v_proj", nullptr}},
    {"attn_gate", "g_proj, sigmoid"},
    {"qkv_rope", "RoPE"},
    {"attn_out", "KV store, attention, head gate"},
    {"attn_proj", "out_proj", true, {".self_attn.out_proj", nullptr}},
    {"resid_attn", "residual adds"},
    {"ffn_norm", "post-attention RMSNorm"},
    {"ffn_gate", "gate_proj, up_proj", true, {".mlp.gate_proj", ".mlp.up_proj"}},
    {"ffn_up", "gate_proj, up_proj", false},  // tapped right after ffn_gate: both follow the two GEMMs
    {"ffn_act", "GEGLU"},
    {"ffn_out", "down_proj", true, {".mlp.down_proj", nullptr}},
    {"resid", "residual adds"},
    {"final_norm", "final RMSNorm"},
    {"logits", "lm_head", true, {"lm_head", nullptr}},
};

bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

}  // namespace

StepProfile::StepProfile(const SparkModel& model) {
  const auto weights = model.linear_weights();
  const bool tied = model.config().tie_word_embeddings;
  for (const Stage& st : kStages) {
    size_t index = sections_.size();
    for (size_t i = 0; i < sections_.size(); ++i) {
      if (sections_[i].label == st.label) index = i;
    }
    if (index == sections_.size()) {
      Section s;
      s.label = st.label;
      for (const char* end : st.weights) {
        if (end == nullptr) continue;
        // A tied head reads the embedding's weights.
        const std::string_view want = std::string_view(end) == "lm_head" && tied ? "model.embedding" : end;
        for (const auto& [name, w] : weights) {
          if (ends_with(name, want)) s.weight_bytes += static_cast<int64_t>(w->bytes());
        }
      }
      sections_.push_back(s);
    }
    stages_.push_back({st.tap, index, st.counts});
  }
  reset();
}

void StepProfile::reset() {
  for (Section& s : sections_) {
    s.seconds = 0;
    s.calls = 0;
    s.steps_run = 0;
    s.last_step = -1;
  }
  steps_ = 0;
  last_ = Clock::now();
}

ActivationTap StepProfile::tap() {
  return [this](const std::string& name, int, const float*, int64_t, int64_t) { record(name); };
}

void StepProfile::record(const std::string& name) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  const StageRef* stage = nullptr;
  for (const StageRef& s : stages_) {
    if (s.tap == name) {
      stage = &s;
      break;
    }
  }
  if (stage == nullptr) {  // a stage this table does not know yet: its own section
    stages_.push_back({name, sections_.size(), true});
    sections_.push_back(Section{name});
    stage = &stages_.back();
  }
  if (name == "embed") ++steps_;  // once per forward()
  Section& section = sections_[stage->section];
  section.seconds += seconds;
  if (stage->counts) ++section.calls;
  if (section.last_step != steps_) {
    section.last_step = steps_;
    ++section.steps_run;
  }
}

std::string StepProfile::table(const std::string& title) const {
  double total = 0;
  for (const Section& s : sections_) total += s.seconds;
  const double steps = static_cast<double>(std::max<int64_t>(1, steps_));
  std::string out = "\n" + title + " (" + std::to_string(steps_) + " steps)\n\n";
  out +=
      "| section | calls per step | us per step | share | weights read GB/s |\n|---|---:|---:|---:|---:|\n";
  char buf[256];
  for (const Section& s : sections_) {
    if (s.calls == 0 && s.seconds == 0) continue;
    char rate[32] = "";
    // Its weights are read once a step it ran in.
    if (s.weight_bytes > 0 && s.seconds > 0)
      std::snprintf(rate, sizeof rate, "%.1f",
                    static_cast<double>(s.weight_bytes) * static_cast<double>(s.steps_run) / s.seconds / 1e9);
    std::snprintf(buf, sizeof buf, "| %s | %.4g | %.1f | %.1f%% | %s |\n", s.label.c_str(),
                  static_cast<double>(s.calls) / steps, s.seconds / steps * 1e6,
                  total > 0 ? 100.0 * s.seconds / total : 0.0, rate);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "| whole step | | %.1f | 100%% | |\n", total / steps * 1e6);
  out += buf;
  return out;
}

}  // namespace spark::bench
