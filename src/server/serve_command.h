// `spark-server [--model DIR] ...`: the OpenAI-compatible server (the default when no subcommand is given).
#pragma once

#include <CLI/CLI.hpp>

namespace spark {

struct ServerOptions;

// Adds the server's flags to the top-level app; returns a function that runs the server once parsed.
std::function<int()> add_serve_options(CLI::App& app);

}  // namespace spark
