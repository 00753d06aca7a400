#include "chat/interpreter.h"

#include <algorithm>

#include "chat/builtins.h"
#include "chat/operators.h"
#include "chat/template_error.h"

namespace spark::jinja {

namespace {

class MacroCallable : public Callable {
 public:
  MacroCallable(const MacroDef& def, std::weak_ptr<Scope> closure)
      : def_(def), closure_(std::move(closure)) {}
  Value call(Interpreter& interp, CallValues& args) const override {
    return interp.invoke_macro(def_, closure_, args);
  }
  std::string repr() const override { return "<Macro '" + def_.name + "'>"; }
  std::string python_type() const override { return "Macro"; }

 private:
  const MacroDef& def_;
  std::weak_ptr<Scope> closure_;
};

// Counts nested macro calls; RAII keeps the count right when an error unwinds.
struct DepthGuard {
  DepthGuard(int& depth, int limit) : depth_(depth) {
    if (++depth_ > limit) {
      --depth_;
      throw RenderError("maximum recursion depth exceeded (" + std::to_string(limit) + " nested macro calls)",
                        RenderError::Kind::kLimit);
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};

// The work a filter or membership test does on a value is proportional to its size; charging it keeps
// quadratic templates (a filter over a big list inside a big loop) inside the step budget.
uint64_t work_units(const Value& v) {
  switch (v.type()) {
    case Value::Type::kList:
      return 1 + v.as_list().items.size();
    case Value::Type::kDict:
      return 1 + v.as_dict().size();
    case Value::Type::kGenerator:
      return 1 + v.as_generator().items.size();
    case Value::Type::kString:
      return 1 + v.as_string().size() / 64;
    default:
      return 1;
  }
}

std::string one_line(const std::string& s) {
  std::string out = s;
  std::replace(out.begin(), out.end(), '\n', ' ');
  std::replace(out.begin(), out.end(), '\r', ' ');
  return out;
}

}  // namespace

const Value* Scope::find_local(std::string_view name) const {
  return index.find(vars, name);
}

void Scope::set(const std::string& name, Value value) {
  index.set(vars, name, std::move(value));
}

Interpreter::Interpreter(const Program& program, const RenderLimits& limits)
    : program_(program), limits_(limits) {}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) ns->attrs = DictData();
}

std::string Interpreter::render(const ContextVars& context) {
  try {
    // Name resolution: template scopes -> render context -> global functions (the context may shadow them).
    auto globals = std::make_shared<Scope>();
    for (auto& [name, value] : global_functions()) globals->set(name, value);
    auto context_scope = std::make_shared<Scope>();
    context_scope->parent = globals;
    for (const auto& [key, value] : context) context_scope->set(key, Value::from_json(*value));
    root_ = std::make_shared<Scope>();
    root_->parent = context_scope;
    std::string out;
    exec_body(program_.body, root_, out);
    root_.reset();
    return out;
  } catch (const RenderError& e) {
    root_.reset();
    const auto kind = e.kind() == RenderError::Kind::kRaised  ? TemplateError::Kind::kRaised
                      : e.kind() == RenderError::Kind::kLimit ? TemplateError::Kind::kLimit
                                                              : TemplateError::Kind::kRuntime;
    throw TemplateError(kind, one_line(e.what()), line_);
  }
}

void Interpreter::check_size(size_t size) const {
  if (size > limits_.max_output_bytes) {
    throw RenderError("output exceeds the " + std::to_string(limits_.max_output_bytes) + "-byte limit",
                      RenderError::Kind::kLimit);
  }
}

void Interpreter::check_items(size_t items) const {
  constexpr size_t kItemBytes = 16;
  check_size(items > SIZE_MAX / kItemBytes ? SIZE_MAX : items * kItemBytes);
}

std::shared_ptr<NamespaceData> Interpreter::new_namespace() {
  auto ns = std::make_shared<NamespaceData>();
  namespaces_.push_back(ns);
  return ns;
}

void Interpreter::step(uint64_t units) {
  steps_ += units;
  if (steps_ > limits_.max_steps) {
    throw RenderError("template exceeded " + std::to_string(limits_.max_steps) + " evaluation steps",
                      RenderError::Kind::kLimit);
  }
}

void Interpreter::emit(std::string& out, std::string_view text) const {
  check_size(out.size() + text.size());
  out += text;
}

// ---- statements -----------------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope,
                                         std::string& out) {
  for (const auto& stmt : body) {
    const Flow flow = exec(*stmt, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const std::shared_ptr<Scope>& scope, std::string& out) {
  step();
  line_ = stmt.line;
  switch (stmt.kind) {
    case StmtKind::kOutput: {
      for (const auto& part : static_cast<const OutputStmt&>(stmt).parts) {
        if (!part.expr) {
          emit(out, part.text);
          continue;
        }
        const Value v = eval(*part.expr, *scope);
        if (v.is_string()) {
          emit(out, v.as_string());
        } else {
          emit(out, str(v));
        }
      }
      return Flow::kNormal;
    }
    case StmtKind::kIf: {
      const auto& node = static_cast<const IfStmt&>(stmt);
      for (const auto& [test, body] : node.branches) {
        if (truthy(eval(*test, *scope))) return exec_body(body, scope, out);
      }
      return exec_body(node.otherwise, scope, out);
    }
    case StmtKind::kFor:
      return exec_for(static_cast<const ForStmt&>(stmt), scope, out);
    case StmtKind::kSet: {
      const auto& node = static_cast<const SetStmt&>(stmt);
      assign(node.target, eval(*node.value, *scope), *scope);
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& node = static_cast<const SetBlockStmt&>(stmt);
      Value v = apply_block_filters(node.filters, Value::string(render_block(node.body, scope)), *scope);
      line_ = node.line;
      assign(node.target, v, *scope);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& node = static_cast<const MacroStmt&>(stmt);
      scope->set(node.def->name, Value::callable(std::make_shared<MacroCallable>(*node.def, scope)));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock:
      exec_call_block(static_cast<const CallBlockStmt&>(stmt), scope, out);
      return Flow::kNormal;
    case StmtKind::kFilterBlock: {
      const auto& node = static_cast<const FilterBlockStmt&>(stmt);
      const Value v =
          apply_block_filters(node.filters, Value::string(render_block(node.body, scope)), *scope);
      emit(out, str(v));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& node = static_cast<const WithStmt&>(stmt);
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      // Values are evaluated in the enclosing scope, as jinja2 does.
      std::vector<Value> values;
      for (const auto& value : node.values) values.push_back(eval(*value, *scope));
      for (size_t i = 0; i < values.size(); ++i) assign(node.targets[i], values[i], *inner);
      return exec_body(node.body, inner, out);
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& node, const std::shared_ptr<Scope>& scope,
                                        std::string& out) {
  std::vector<Value> items = iterate(eval(*node.iterable, *scope));
  if (node.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      auto filter_scope = std::make_shared<Scope>();
      filter_scope->parent = scope;
      assign(node.target, item, *filter_scope);
      if (truthy(eval(*node.filter, *filter_scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto else_scope = std::make_shared<Scope>();
    else_scope->parent = scope;
    // A break/continue here belongs to an enclosing loop.
    return exec_body(node.otherwise, else_scope, out);
  }
  auto loop = std::make_shared<LoopData>();
  loop->items = std::move(items);
  // loop.changed(loop) would keep the loop alive through itself; drop those values however the loop ends.
  struct ForgetChanged {
    LoopData& loop;
    ~ForgetChanged() { loop.last_changed.clear(); }
  } forget_changed{*loop};
  const Value loop_value = Value::loop(loop);
  for (size_t i = 0; i < loop->items.size(); ++i) {
    step();
    loop->index0 = i;
    // jinja2 gives every iteration a fresh scope: a {% set %} in the body never outlives the iteration.
    auto iteration = std::make_shared<Scope>();
    iteration->parent = scope;
    line_ = node.line;
    assign(node.target, loop->items[i], *iteration);
    iteration->set("loop", loop_value);
    if (exec_body(node.body, iteration, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::exec_call_block(const CallBlockStmt& node, const std::shared_ptr<Scope>& scope,
                                  std::string& out) {
  const Value caller = Value::callable(std::make_shared<MacroCallable>(*node.caller, scope));
  const Value v = eval_call(*node.call, *scope, &caller);
  emit(out, str(v));
}

std::string Interpreter::render_block(const Body& body, const std::shared_ptr<Scope>& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  std::string out;
  exec_body(body, inner, out);
  return out;
}

Value Interpreter::apply_block_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value value,
                                       Scope& scope) {
  for (const auto& filter : filters) {
    line_ = filter->line;
    CallValues args = eval_args(filter->args, scope);
    value = call_filter(filter->name, value, args);
  }
  return value;
}

void Interpreter::assign(const Target& target, const Value& value, Scope& scope) {
  switch (target.kind) {
    case Target::Kind::kName:
      scope.set(target.name, value);
      return;
    case Target::Kind::kNamespaceAttr: {
      const Value ns = lookup(target.name, scope);
      if (!ns.is_namespace()) throw RenderError("cannot assign attribute on non-namespace object");
      ns.as_namespace().attrs.set(target.attr, value);
      return;
    }
    case Target::Kind::kTuple: {
      const std::vector<Value> items = iterate(value);
      if (items.size() < target.items.size()) {
        throw RenderError("not enough values to unpack (expected " + std::to_string(target.items.size()) +
                          ", got " + std::to_string(items.size()) + ")");
      }
      if (items.size() > target.items.size()) {
        throw RenderError("too many values to unpack (expected " + std::to_string(target.items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i) assign(target.items[i], items[i], scope);
      return;
    }
  }
}

Value Interpreter::invoke_macro(const MacroDef& def, const std::weak_ptr<Scope>& closure, CallValues& args) {
  DepthGuard depth(call_depth_, limits_.max_call_depth);
  const int saved_line = line_;
  auto scope = std::make_shared<Scope>();
  scope->parent = closure.lock();
  if (!scope->parent) scope->parent = root_;

  // jinja2's Macro.__call__: positionals fill parameters in order, then keywords, then defaults.
  const size_t nparams = def.params.size();
  std::vector<std::pair<std::string, Value>> kwargs = args.keyword;
  auto take_kwarg = [&](const std::string& name) -> std::optional<Value> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == name) {
        Value v = std::move(it->second);
        kwargs.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  const size_t first_default = nparams - def.defaults.size();
  for (size_t i = 0; i < nparams; ++i) {
    const std::string& name = def.params[i];
    std::optional<Value> v;
    if (i < args.positional.size()) {
      v = args.positional[i];
    } else {
      v = take_kwarg(name);
    }
    if (!v) {
      if (i >= first_default) {
        line_ = def.line;
        v = eval(*def.defaults[i - first_default], *scope);
      } else {
        v = Value::undefined("parameter '" + name + "' was not provided");
      }
    }
    scope->set(name, std::move(*v));
  }
  if (def.uses_caller) {
    std::optional<Value> caller = take_kwarg("caller");
    scope->set("caller", caller ? *caller : Value::undefined("No caller defined"));
  }
  if (def.uses_kwargs) {
    DictData extra;
    for (auto& [key, value] : kwargs) extra.set(key, value);
    scope->set("kwargs", Value::dict(std::move(extra)));
  } else if (!kwargs.empty()) {
    if (kwargs.front().first == "caller") {
      throw RenderError(
          "macro '" + def.name +
          "' was invoked with two values for the special caller argument. This is most likely a bug.");
    }
    throw RenderError("macro '" + def.name + "' takes no keyword argument '" + kwargs.front().first + "'");
  }
  if (def.uses_varargs) {
    std::vector<Value> extra;
    for (size_t i = nparams; i < args.positional.size(); ++i) extra.push_back(args.positional[i]);
    scope->set("varargs", Value::list(std::move(extra), SeqKind::kTuple));
  } else if (args.positional.size() > nparams) {
    throw RenderError("macro '" + def.name + "' takes not more than " + std::to_string(nparams) +
                      " argument(s)");
  }
  std::string out;
  exec_body(def.body, scope, out);
  line_ = saved_line;
  return Value::string(std::move(out));
}

// ---- expressions ----------------------------------------------------------------------------------------

Value Interpreter::lookup(const std::string& name, Scope& scope) const {
  for (const Scope* s = &scope; s != nullptr; s = s->parent.get()) {
    if (const Value* v = s->find_local(name)) return *v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::call_filter(std::string_view name, const Value& input, CallValues& args) {
  step(work_units(input));
  return apply_filter(*this, name, input, args);
}

bool Interpreter::call_test(std::string_view name, const Value& input, CallValues& args) {
  return apply_test(*this, name, input, args);
}

Value Interpreter::call_value(const Value& callee, CallValues& args) {
  fail_if_undefined(callee);
  if (!callee.is_callable()) throw RenderError("'" + type_name(callee) + "' object is not callable");
  step();
  return callee.as_callable().call(*this, args);
}

CallValues Interpreter::eval_args(const CallArgs& args, Scope& scope) {
  CallValues values;
  for (const auto& arg : args.positional) values.positional.push_back(eval(*arg, scope));
  if (args.star_args) {
    for (Value& v : iterate(eval(*args.star_args, scope))) values.positional.push_back(std::move(v));
  }
  for (const auto& [key, arg] : args.keyword) values.keyword.emplace_back(key, eval(*arg, scope));
  if (args.star_kwargs) {
    const Value extra = eval(*args.star_kwargs, scope);
    if (!extra.is_dict()) throw RenderError("argument after ** must be a mapping, not " + type_name(extra));
    for (const auto& [key, value] : extra.as_dict().entries()) values.keyword.emplace_back(key, value);
  }
  return values;
}

Value Interpreter::eval_call(const CallExpr& call, Scope& scope, const Value* caller) {
  const Value callee = eval(*call.callee, scope);
  CallValues args = eval_args(call.args, scope);
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  line_ = call.line;
  return call_value(callee, args);
}

bool Interpreter::eval_compare(const CompareExpr& expr, Scope& scope) {
  Value left = eval(*expr.first, scope);
  for (const auto& [op, operand] : expr.rest) {
    Value right = eval(*operand, scope);
    line_ = expr.line;
    if (op == CompareOp::kIn || op == CompareOp::kNotIn) step(work_units(right));
    if (!compare(op, left, right)) return false;
    left = std::move(right);
  }
  return true;
}

Value Interpreter::eval(const Expr& expr, Scope& scope) {
  line_ = expr.line;
  switch (expr.kind) {
    case ExprKind::kConst:
      return static_cast<const ConstExpr&>(expr).value;
    case ExprKind::kName:
      return lookup(static_cast<const NameExpr&>(expr).name, scope);
    case ExprKind::kGetattr: {
      const auto& node = static_cast<const GetattrExpr&>(expr);
      const Value obj = eval(*node.object, scope);
      line_ = node.line;
      return get_attribute(obj, node.attr);
    }
    case ExprKind::kGetitem: {
      const auto& node = static_cast<const GetitemExpr&>(expr);
      const Value obj = eval(*node.object, scope);
      if (node.index->kind == ExprKind::kSlice) {
        const auto& slice = static_cast<const SliceExpr&>(*node.index);
        std::optional<Value> bounds[3];
        const ExprPtr* parts[3] = {&slice.start, &slice.stop, &slice.step};
        for (int i = 0; i < 3; ++i) {
          if (*parts[i]) bounds[i] = eval(**parts[i], scope);
        }
        line_ = node.line;
        return get_slice(obj, bounds[0] ? &*bounds[0] : nullptr, bounds[1] ? &*bounds[1] : nullptr,
                         bounds[2] ? &*bounds[2] : nullptr);
      }
      const Value key = eval(*node.index, scope);
      line_ = node.line;
      return get_item(obj, key);
    }
    case ExprKind::kSlice:
      throw RenderError("slice outside a subscript");
    case ExprKind::kCall:
      return eval_call(static_cast<const CallExpr&>(expr), scope, nullptr);
    case ExprKind::kFilter: {
      const auto& node = static_cast<const FilterExpr&>(expr);
      const Value input = eval(*node.input, scope);
      CallValues args = eval_args(node.args, scope);
      line_ = node.line;
      return call_filter(node.name, input, args);
    }
    case ExprKind::kTest: {
      const auto& node = static_cast<const TestExpr&>(expr);
      const Value input = eval(*node.input, scope);
      CallValues args = eval_args(node.args, scope);
      line_ = node.line;
      return Value::boolean(call_test(node.name, input, args));
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*static_cast<const UnaryExpr&>(expr).operand, scope)));
    case ExprKind::kNeg: {
      const Value v = eval(*static_cast<const UnaryExpr&>(expr).operand, scope);
      line_ = expr.line;
      return negate(v);
    }
    case ExprKind::kPos: {
      const Value v = eval(*static_cast<const UnaryExpr&>(expr).operand, scope);
      line_ = expr.line;
      return unary_plus(v);
    }
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      const Value a = eval(*node.left, scope);
      const Value b = eval(*node.right, scope);
      line_ = node.line;
      return binary_op(node.op, a, b, *this);
    }
    case ExprKind::kAnd: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value a = eval(*node.left, scope);
      return truthy(a) ? eval(*node.right, scope) : a;
    }
    case ExprKind::kOr: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value a = eval(*node.left, scope);
      return truthy(a) ? a : eval(*node.right, scope);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const auto& part : static_cast<const ConcatExpr&>(expr).parts) {
        append_str(eval(*part, scope), out, limits_.max_output_bytes);
        check_size(out.size());
      }
      return Value::string(std::move(out));
    }
    case ExprKind::kCompare:
      return Value::boolean(eval_compare(static_cast<const CompareExpr&>(expr), scope));
    case ExprKind::kCond: {
      const auto& node = static_cast<const CondExpr&>(expr);
      if (truthy(eval(*node.test, scope))) return eval(*node.then, scope);
      if (node.otherwise) return eval(*node.otherwise, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(node.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kList: {
      const auto& node = static_cast<const ListExpr&>(expr);
      std::vector<Value> items;
      items.reserve(node.items.size());
      for (const auto& item : node.items) items.push_back(eval(*item, scope));
      return Value::list(std::move(items), node.tuple ? SeqKind::kTuple : SeqKind::kList);
    }
    case ExprKind::kDict: {
      DictData d;
      for (const auto& [key_expr, value_expr] : static_cast<const DictExpr&>(expr).items) {
        const Value key = eval(*key_expr, scope);
        if (!key.is_string()) {
          line_ = key_expr->line;
          throw RenderError("only string keys are supported in chat template dicts, got " + type_name(key));
        }
        d.set(key.as_string(), eval(*value_expr, scope));
      }
      return Value::dict(std::move(d));
    }
  }
  throw RenderError("unknown expression");
}

}  // namespace spark::jinja
