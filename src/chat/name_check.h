// jinja2 reports an unknown filter or test when it compiles the template, except where it defers the check
// to run time; this applies the same rule to a parsed template.
#pragma once

#include "chat/ast.h"

namespace spark::jinja {

// Throws TemplateError (kSyntax) for a filter or test name jinja2 would reject at compile time.
void check_filter_and_test_names(const Program& program);

}  // namespace spark::jinja
