// `spark-server tokenize` and `spark-server detokenize`: the model's tokenizer from the command line,
// one text at a time or as a JSON-lines batch (one process for thousands of strings, as tests need).
#pragma once

#include <CLI/CLI.hpp>

namespace spark {

void add_tokenize_commands(CLI::App& app, int& exit_code);

}  // namespace spark
