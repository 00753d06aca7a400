// Renders a parsed template: jinja2's scoping (a fresh scope per loop iteration, macros closing over the
// scope that defined them, namespace() as the only way to carry state out of a loop), Python's operator
// semantics, and guards that turn runaway templates into errors instead of hangs or crashes.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace spark::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // also bounds any single string or list a template builds
  int max_call_depth = 200;  // macro recursion (Python's own limit would stop jinja2 near here)
  // Statements, loop iterations, calls and the items filters touch: no template runs forever.
  uint64_t max_steps = 20'000'000;
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  util::NameIndex index;  // a request's chat_template_kwargs become the render context's names

  const Value* find_local(std::string_view name) const;
  void set(const std::string& name, Value value);
};

// Template variables by reference (no copy of large message lists); later entries override earlier ones.
using ContextVars = std::vector<std::pair<std::string, const nlohmann::ordered_json*>>;

class Interpreter {
 public:
  Interpreter(const Program& program, const RenderLimits& limits);
  ~Interpreter();

  // Throws TemplateError.
  std::string render(const ContextVars& context);

  // Used by builtins (map/select call filters and tests by name; callables call back into macros).
  Value call_filter(std::string_view name, const Value& input, CallValues& args);
  bool call_test(std::string_view name, const Value& input, CallValues& args);
  Value call_value(const Value& callee, CallValues& args);
  Value invoke_macro(const MacroDef& def, const std::weak_ptr<Scope>& closure, CallValues& args);
  // Throws a limit error when a string of this many bytes would exceed the output budget.
  void check_size(size_t size) const;
  // Appends text to out after checking the result against the output budget, so text that grows piece by
  // piece (filters, string methods, the render itself) never passes the limit.
  void emit(std::string& out, std::string_view text) const;
  // The same for a list of this many items, each counted as 16 bytes (a list of 360M items was 4.5 GB
  // before its count reached the byte budget).
  void check_items(size_t items) const;
  size_t max_output_bytes() const { return limits_.max_output_bytes; }
  // str(v) inside a render: bounded by the render's own output limit, like everything the template prints.
  std::string str(const Value& v) const { return to_str(v, limits_.max_output_bytes); }
  std::shared_ptr<NamespaceData> new_namespace();
  // Counts work against the step budget (throws a limit error when it runs out).
  void step(uint64_t units = 1);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec(const Stmt& stmt, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_for(const ForStmt& node, const std::shared_ptr<Scope>& scope, std::string& out);
  void exec_call_block(const CallBlockStmt& node, const std::shared_ptr<Scope>& scope, std::string& out);
  std::string render_block(const Body& body, const std::shared_ptr<Scope>& scope);
  Value apply_block_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value value,
                            Scope& scope);
  void assign(const Target& target, const Value& value, Scope& scope);

  Value eval(const Expr& expr, Scope& scope);
  Value lookup(const std::string& name, Scope& scope) const;
  Value eval_call(const CallExpr& call, Scope& scope, const Value* caller);
  CallValues eval_args(const CallArgs& args, Scope& scope);
  bool eval_compare(const CompareExpr& expr, Scope& scope);

  const Program& program_;
  RenderLimits limits_;
  int line_ = 0;
  int call_depth_ = 0;
  uint64_t steps_ = 0;
  std::shared_ptr<Scope> root_;
  // Every namespace created while rendering, so reference cycles (ns.self = ns) are broken afterwards.
  std::vector<std::shared_ptr<NamespaceData>> namespaces_;
};

}  // namespace spark::jinja
