// spark-server: the command-line entry point. Every failure a user can cause ends as one line on
// stderr and a non-zero exit status, never a crash or a stack trace.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/generate_command.h"
#include "cli/grammar_check_command.h"
#include "cli/hw_command.h"
#include "cli/tokenize_command.h"
#include "server/serve_command.h"
#include "spark/error.h"

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries command output (token ids, JSON) that scripts parse.
  spdlog::set_default_logger(spdlog::stderr_color_mt("spark"));
  CLI::App app{"spark-server: CPU inference server for Spark-X2.5 models"};
  app.require_subcommand(0, 1);
  int exit_code = 0;
  auto serve = spark::add_serve_options(app);
  spark::add_generate_command(app, exit_code);
  spark::add_hw_command(app, exit_code);
  spark::add_tokenize_commands(app, exit_code);
  spark::add_grammar_check_command(app, exit_code);
  try {
    app.parse(argc, argv);
    // No subcommand: serve.
    if (app.get_subcommands().empty()) exit_code = serve();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const spark::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
