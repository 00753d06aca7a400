// spark-bench --profile: where a decode step's wall time goes. The model calls its activation tap after
// each stage of a step (SparkModel::set_activation_tap); the time between two taps is charged to the
// stage the second one ends, so the sections add up to the whole step, the bench loop between steps
// included (charged to the embedding, the first stage of the next step). Each section's projection
// weights give its read rate, to set beside the machine's read bandwidth.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "model/spark_model.h"

namespace spark::bench {

class StepProfile {
 public:
  // Sections named after the model's stages; `model` gives each projection's weight bytes per token.
  explicit StepProfile(const SparkModel& model);

  // The tap to install on the model while the profiled steps run.
  ActivationTap tap();
  // Drops what was recorded so far (the warm-up's steps) and starts the clock again.
  void reset();
  // Starts the clock again before a run of steps: the time since the last tap (the bench between runs,
  // another sequence's steps) is charged to no section.
  void restart_clock() { last_ = Clock::now(); }

  // A markdown table: per section, calls and microseconds per step, share of the step, and read GB/s of
  // the projections; `title` heads it.
  std::string table(const std::string& title) const;

 private:
  struct Section {
    std::string label;
    double seconds = 0;
    int64_t calls = 0;
    int64_t weight_bytes = 0;  // what the section's projections read per step, all layers (0: none)
    int64_t steps_run = 0;     // steps it ran in (a forward without logits rows ends before the head)
    int64_t last_step = -1;
  };
  void record(const std::string& name);

  using Clock = std::chrono::steady_clock;
  std::vector<Section> sections_;
  struct StageRef {
    std::string tap;
    size_t section;
    bool counts;  // a call of its section (not a second tap right after the section's own)
  };
  std::vector<StageRef> stages_;  // in the model's stage order
  Clock::time_point last_;
  int64_t steps_ = 0;
};

}  // namespace spark::bench
