#include "chat/name_check.h"

#include <initializer_list>

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

  void args(const CallArgs& a, bool soft) {
    for (const auto& e : a.positional) expr(*e, soft);
    for (const auto& [key, e] : a.keyword) expr(*e, soft);
    if (a.star_args) expr(*a.star_args, soft);
    if (a.star_kwargs) expr(*a.star_kwargs, soft);
  }

  void expr(const Expr& e, bool soft) {
    switch (e.kind) {
      case ExprKind::kConst:
      case ExprKind::kName:
        return;
      case ExprKind::kGetattr:
        expr(*static_cast<const GetattrExpr&>(e).object, soft);
        return;
      case ExprKind::kGetitem:
        expr(*static_cast<const GetitemExpr&>(e).object, soft);
        expr(*static_cast<const GetitemExpr&>(e).index, soft);
        return;
      case ExprKind::kSlice: {
        const auto& node = static_cast<const SliceExpr&>(e);
        for (const ExprPtr* p : {&node.start, &node.stop, &node.step}) {
          if (*p) expr(**p, soft);
        }
        return;
      }
      case ExprKind::kCall:
        expr(*static_cast<const CallExpr&>(e).callee, soft);
        args(static_cast<const CallExpr&>(e).args, soft);
        return;
      case ExprKind::kFilter: {
        const auto& node = static_cast<const FilterExpr&>(e);
        if (!soft && !filter_known(node.name)) fail("No filter named '" + node.name + "'.", node.line);
        if (node.input) expr(*node.input, soft);
        args(node.args, soft);
        return;
      }
      case ExprKind::kTest: {
        const auto& node = static_cast<const TestExpr&>(e);
        if (!soft && !test_known(node.name)) fail("No test named '" + node.name + "'.", node.line);
        expr(*node.input, soft);
        args(node.args, soft);
        return;
      }
      case ExprKind::kNot:
      case ExprKind::kNeg:
      case ExprKind::kPos:
        expr(*static_cast<const UnaryExpr&>(e).operand, soft);
        return;
      case ExprKind::kBinary:
      case ExprKind::kAnd:
      case ExprKind::kOr:
        expr(*static_cast<const BinaryExpr&>(e).left, soft);
        expr(*static_cast<const BinaryExpr&>(e).right, soft);
        return;
      case ExprKind::kConcat:
        for (const auto& part : static_cast<const ConcatExpr&>(e).parts) expr(*part, soft);
        return;
      case ExprKind::kCompare:
        expr(*static_cast<const CompareExpr&>(e).first, soft);
        for (const auto& [op, operand] : static_cast<const CompareExpr&>(e).rest) expr(*operand, soft);
        return;
      case ExprKind::kCond: {
        const auto& node = static_cast<const CondExpr&>(e);
        expr(*node.test, true);
        expr(*node.then, true);
        if (node.otherwise) expr(*node.otherwise, true);
        return;
      }
      case ExprKind::kList:
        for (const auto& item : static_cast<const ListExpr&>(e).items) expr(*item, soft);
        return;
      case ExprKind::kDict:
        for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
          expr(*k, soft);
          expr(*v, soft);
        }
        return;
    }
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
