// Builds the AST from tokens with jinja2's grammar and operator precedence. Unknown filters and tests are
// syntax errors, as jinja2 reports them when compiling; tags HF templates never use (extends, include,
// import, block, recursive loops) are rejected with a clear message.
#pragma once

#include <memory>
#include <string_view>

#include "chat/ast.h"

namespace spark::jinja {

// Throws TemplateError (kSyntax) naming the line.
std::unique_ptr<Program> parse_template(std::string_view source);

}  // namespace spark::jinja
