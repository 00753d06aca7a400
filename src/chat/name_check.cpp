#include "chat/name_check.h"

#include "chat/builtins.h"
#include "chat/template_error.h"

namespace spark::jinja {

namespace {

// Unknown names are compile errors in jinja2, except inside an {% if %} (its test and branches) or an inline
// if-expression, where the error waits until the filter actually runs. Loop, macro, call, filter, set and
// with bodies start a fresh frame, where the compile-time check applies again.
class NameChecker {
 public:
  void body(const Body& stmts, bool soft) {
    for (const auto& s : stmts) stmt(*s, soft);
  }

 private:
  void stmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::kOutput:
        for (const auto& part : static_cast<const OutputStmt&>(s).parts) {
          if (part.expr) expr(*part.expr, soft);
        }
        return;
      case StmtKind::kIf:
        for (const auto& [test, branch] : static_cast<const IfStmt&>(s).branches) {
          expr(*test, true);
          body(branch, true);
        }
        body(static_cast<const IfStmt&>(s).otherwise, true);
        return;
      case StmtKind::kFor: {
        const auto& node = static_cast<const ForStmt&>(s);
        expr(*node.iterable, soft);
        if (node.filter) expr(*node.filter, false);
        body(node.body, false);
        body(node.otherwise, false);
        return;
      }
      case StmtKind::kSet:
        expr(*static_cast<const SetStmt&>(s).value, soft);
        return;
      case StmtKind::kSetBlock: {
        const auto& node = static_cast<const SetBlockStmt&>(s);
        for (const auto& f : node.filters) expr(*f, false);
        body(node.body, false);
        return;
      }
      case StmtKind::kMacro:
        macro(*static_cast<const MacroStmt&>(s).def);
        return;
      case StmtKind::kCallBlock: {
        const auto& node = static_cast<const CallBlockStmt&>(s);
        expr(*node.call, soft);
        macro(*node.caller);
        return;
      }
      case StmtKind::kFilterBlock: {
        const auto& node = static_cast<const FilterBlockStmt&>(s);
        for (const auto& f : node.filters) expr(*f, false);
        body(node.body, false);
        return;
      }
      case StmtKind::kWith: {
        const auto& node = static_cast<const WithStmt&>(s);
        for (const auto& v : node.values) expr(*v, soft);
        body(node.body, false);
        return;
      }
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        return;
    }
  }

  void macro(const MacroDef& def) {
    for (const auto& d : def.defaults) expr(*d, false);
    body(def.body, false);
  }

  // Filter and test names are checked where they are not soft; an inline if-expression makes everything
  // below it soft.
  void expr(const Expr& e, bool soft) {
    if (!soft && e.kind == ExprKind::kFilter) {
      const auto& node = static_cast<const FilterExpr&>(e);
      if (!filter_known(node.name)) fail("No filter named '" + node.name + "'.", node.line);
    }
    if (!soft && e.kind == ExprKind::kTest) {
      const auto& node = static_cast<const TestExpr&>(e);
      if (!test_known(node.name)) fail("No test named '" + node.name + "'.", node.line);
    }
    const bool child_soft = soft || e.kind == ExprKind::kCond;
    for_each_child(e, [this, child_soft](const Expr& c) { expr(c, child_soft); });
  }

  [[noreturn]] static void fail(const std::string& message, int line) {
    throw TemplateError(TemplateError::Kind::kSyntax, message, line);
  }
};

}  // namespace

void check_filter_and_test_names(const Program& program) {
  NameChecker().body(program.body, false);
}

}  // namespace spark::jinja
