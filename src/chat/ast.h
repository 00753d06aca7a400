// The parsed form of a template: expression and statement nodes mirroring jinja2's node types, each with
// the template line it came from (for error messages).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace spark::jinja {

enum class ExprKind {
  kConst,
  kName,
  kGetattr,
  kGetitem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNot,
  kNeg,
  kPos,
  kBinary,
  kAnd,
  kOr,
  kConcat,
  kCompare,
  kCond,
  kList,
  kDict,
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
  int height = 1;  // levels of the tree below and including this node (set by the parser)
};
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct ConstExpr : Expr {
  ConstExpr(Value v, int l) : Expr(ExprKind::kConst, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string n, int l) : Expr(ExprKind::kName, l), name(std::move(n)) {}
  std::string name;
};

struct GetattrExpr : Expr {
  GetattrExpr(ExprPtr o, std::string a, int l)
      : Expr(ExprKind::kGetattr, l), object(std::move(o)), attr(std::move(a)) {}
  ExprPtr object;
  std::string attr;
};

struct GetitemExpr : Expr {
  GetitemExpr(ExprPtr o, ExprPtr i, int l)
      : Expr(ExprKind::kGetitem, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;  // a SliceExpr for x[a:b:c]
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprKind::kSlice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallExpr : Expr {
  CallExpr(ExprPtr c, int l) : Expr(ExprKind::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  CallArgs args;
};

// One `|name(args)` application; a FilterExpr with a null input is a link in a {% filter %} or
// {% set x | f %} chain, whose input is the rendered block.
struct FilterExpr : Expr {
  FilterExpr(ExprPtr in, std::string n, int l)
      : Expr(ExprKind::kFilter, l), input(std::move(in)), name(std::move(n)) {}
  ExprPtr input;
  std::string name;
  CallArgs args;
};

struct TestExpr : Expr {
  TestExpr(ExprPtr in, std::string n, int l)
      : Expr(ExprKind::kTest, l), input(std::move(in)), name(std::move(n)) {}
  ExprPtr input;
  std::string name;
  CallArgs args;
};

struct UnaryExpr : Expr {
  UnaryExpr(ExprKind k, ExprPtr o, int l) : Expr(k, l), operand(std::move(o)) {}
  ExprPtr operand;
};

struct BinaryExpr : Expr {
  BinaryExpr(ExprKind k, BinaryOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(k, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;  // meaningful for kBinary only; kAnd/kOr use left/right
  ExprPtr left, right;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(int l) : Expr(ExprKind::kConcat, l) {}
  std::vector<ExprPtr> parts;
};

struct CompareExpr : Expr {
  CompareExpr(ExprPtr f, int l) : Expr(ExprKind::kCompare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr : Expr {
  explicit CondExpr(int l) : Expr(ExprKind::kCond, l) {}
  ExprPtr test, then, otherwise;  // otherwise may be null: the result is then undefined
};

struct ListExpr : Expr {
  ListExpr(bool t, int l) : Expr(ExprKind::kList, l), tuple(t) {}
  bool tuple;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// Calls visit(const Expr&) on each child of e that is present, in source order: the one walk over an
// expression's children, shared by the parser's height bound and the name check.
template <typename Visit>
void for_each_child(const Expr& e, Visit&& visit) {
  const auto one = [&visit](const ExprPtr& c) {
    if (c) visit(static_cast<const Expr&>(*c));
  };
  const auto args = [&one](const CallArgs& a) {
    for (const ExprPtr& p : a.positional) one(p);
    for (const auto& [name, value] : a.keyword) one(value);
    one(a.star_args);
    one(a.star_kwargs);
  };
  switch (e.kind) {
    case ExprKind::kConst:
    case ExprKind::kName:
      return;
    case ExprKind::kGetattr:
      one(static_cast<const GetattrExpr&>(e).object);
      return;
    case ExprKind::kGetitem:
      one(static_cast<const GetitemExpr&>(e).object);
      one(static_cast<const GetitemExpr&>(e).index);
      return;
    case ExprKind::kSlice:
      one(static_cast<const SliceExpr&>(e).start);
      one(static_cast<const SliceExpr&>(e).stop);
      one(static_cast<const SliceExpr&>(e).step);
      return;
    case ExprKind::kCall:
      one(static_cast<const CallExpr&>(e).callee);
      args(static_cast<const CallExpr&>(e).args);
      return;
    case ExprKind::kFilter:
      one(static_cast<const FilterExpr&>(e).input);
      args(static_cast<const FilterExpr&>(e).args);
      return;
    case ExprKind::kTest:
      one(static_cast<const TestExpr&>(e).input);
      args(static_cast<const TestExpr&>(e).args);
      return;
    case ExprKind::kNot:
    case ExprKind::kNeg:
    case ExprKind::kPos:
      one(static_cast<const UnaryExpr&>(e).operand);
      return;
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr:
      one(static_cast<const BinaryExpr&>(e).left);
      one(static_cast<const BinaryExpr&>(e).right);
      return;
    case ExprKind::kConcat:
      for (const ExprPtr& p : static_cast<const ConcatExpr&>(e).parts) one(p);
      return;
    case ExprKind::kCompare:
      one(static_cast<const CompareExpr&>(e).first);
      for (const auto& [op, p] : static_cast<const CompareExpr&>(e).rest) one(p);
      return;
    case ExprKind::kCond:
      one(static_cast<const CondExpr&>(e).test);
      one(static_cast<const CondExpr&>(e).then);
      one(static_cast<const CondExpr&>(e).otherwise);
      return;
    case ExprKind::kList:
      for (const ExprPtr& p : static_cast<const ListExpr&>(e).items) one(p);
      return;
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        one(k);
        one(v);
      }
      return;
  }
}

// Assignment targets: a name, a tuple of targets (for k, v in ...), or a namespace attribute (ns.x).
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr } kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
  int line = 0;
};

enum class StmtKind {
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Template data and {{ expressions }} between two statements; `text` holds the data of parts whose expr
// is null.
struct OutputStmt : Stmt {
  explicit OutputStmt(int l) : Stmt(StmtKind::kOutput, l) {}
  struct Part {
    std::string text;
    ExprPtr expr;
  };
  std::vector<Part> parts;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if + elifs
  Body otherwise;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::kFor, l) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`
  Body body;
  Body otherwise;
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtKind::kSet, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtKind::kSetBlock, l) {}
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned to the last defaults.size() params
  Body body;
  // Set when the body reads these names, as jinja2 decides from the body's undeclared names.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
  int line = 0;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtKind::kMacro, l) {}
  std::unique_ptr<MacroDef> def;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int l) : Stmt(StmtKind::kCallBlock, l) {}
  std::unique_ptr<MacroDef> caller;  // the block body, callable as caller(...)
  std::unique_ptr<CallExpr> call;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::kFilterBlock, l) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(StmtKind::kWith, l) {}
  std::vector<Target> targets;
  std::vector<ExprPtr> values;
  Body body;
};

struct Program {
  Body body;
};

}  // namespace spark::jinja
