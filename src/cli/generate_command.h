// `spark-server generate`: greedy decoding from token ids with each step's top logits, so anyone can
// compare this engine with another token by token (and dump every logit or activation to .npy).
#pragma once

#include <CLI/CLI.hpp>

namespace spark {

void add_generate_command(CLI::App& app, int& exit_code);

}  // namespace spark
