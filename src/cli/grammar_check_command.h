// `spark-server grammar-check --tokenizer DIR CASES.jsonl [--summary]`: the MaskBench protocol. For each
// case, compile its JSON Schema (timed), then tokenize each test text and walk it token by token, computing
// the full vocabulary mask before every token (timed) and checking the token is allowed.
#pragma once

#include <CLI/CLI.hpp>

namespace spark {

void add_grammar_check_command(CLI::App& app, int& exit_code);

}  // namespace spark
