// spark-chat-render: renders many chat-template cases in one process for the parity test against Python's
// jinja2. Reads JSON lines from stdin and writes one JSON line per case to stdout:
//   {"context": {...}}                       render the --template file with this context
//   {"template": "...", "context": {...}}    render an inline template (parsed once per distinct text)
//   {"chat": {"messages": [...], "tools": ..., "add_generation_prompt": true, "kwargs": {...},
//             "special_tokens": {...}}}       apply_chat_template with the --template file (or "template")
//   {"default_template": true, ...}          use spark_default_chat_template() as the template
// Output: {"ok": true, "text": "..."} or {"ok": false, "kind": "syntax|raised|runtime|limit|error",
//          "error": "<what()>", "detail": "<bare message>"}.
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat/default_template.h"

namespace {

using nlohmann::ordered_json;

const char* kind_name(spark::TemplateError::Kind kind) {
  switch (kind) {
    case spark::TemplateError::Kind::kSyntax:
      return "syntax";
    case spark::TemplateError::Kind::kRaised:
      return "raised";
    case spark::TemplateError::Kind::kRuntime:
      return "runtime";
    case spark::TemplateError::Kind::kLimit:
      return "limit";
  }
  return "error";
}

class TemplateCache {
 public:
  const spark::ChatTemplate& get(const std::string& text) {
    auto it = cache_.find(text);
    if (it == cache_.end()) it = cache_.emplace(text, std::make_unique<spark::ChatTemplate>(text)).first;
    return *it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<spark::ChatTemplate>> cache_;
};

ordered_json run_case(const ordered_json& c, const std::string* file_template, TemplateCache& cache) {
  std::string text;
  if (c.contains("template")) {
    text = c.at("template").get<std::string>();
  } else if (c.value("default_template", false)) {
    text = spark::spark_default_chat_template();
  } else if (file_template != nullptr) {
    text = *file_template;
  } else {
    throw spark::Error("case has no template and no --template file was given");
  }
  const spark::ChatTemplate& tmpl = cache.get(text);
  if (c.contains("chat")) {
    const ordered_json& chat = c.at("chat");
    return {
        {"ok", true},
        {"text", spark::apply_chat_template(
                     tmpl, chat.value("messages", ordered_json::array()), chat.value("tools", ordered_json()),
                     chat.value("add_generation_prompt", false), chat.value("kwargs", ordered_json::object()),
                     chat.value("special_tokens", ordered_json::object()))}};
  }
  return {{"ok", true}, {"text", tmpl.render(c.at("context"))}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string file_template;
  bool have_file = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--template" && i + 1 < argc) {
      std::ifstream in(argv[++i], std::ios::binary);
      if (!in) {
        std::cerr << "spark-chat-render: cannot read " << argv[i] << "\n";
        return 2;
      }
      std::stringstream ss;
      ss << in.rdbuf();
      file_template = ss.str();
      have_file = true;
    } else {
      std::cerr << "usage: spark-chat-render [--template FILE] < cases.jsonl > results.jsonl\n";
      return 2;
    }
  }
  TemplateCache cache;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    ordered_json result;
    try {
      result = run_case(ordered_json::parse(line), have_file ? &file_template : nullptr, cache);
    } catch (const spark::TemplateError& e) {
      result = {{"ok", false}, {"kind", kind_name(e.kind())}, {"error", e.what()}, {"detail", e.detail()}};
    } catch (const std::exception& e) {
      result = {{"ok", false}, {"kind", "error"}, {"error", e.what()}, {"detail", e.what()}};
    }
    std::cout << result.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << "\n";
  }
  return 0;
}
