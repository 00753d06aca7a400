// `spark-server hw`: the hardware report (CPU features, the kernel tier in use, and which kernel each
// class of GEMM takes for each weight format and why), as text or JSON.
#pragma once

#include <CLI/CLI.hpp>

namespace spark {

void add_hw_command(CLI::App& app, int& exit_code);

}  // namespace spark
