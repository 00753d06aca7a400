#include "chat/parser.h"

#include <algorithm>

#include "chat/lexer.h"
#include "chat/name_check.h"
#include "chat/template_error.h"

namespace spark::jinja {

namespace {

// Bounds recursion on pathological input such as thousands of nested parentheses or blocks, and the height
// of every expression tree: the name check, the interpreter and the tree's destructors recurse once per
// level, and chains the parser builds in a loop (a.b.c, 1 + 1 + 1) nest one level per link. A 480 KB
// template of nested ifs, or a 400 KB chain, overflowed the stack.
constexpr int kMaxNesting = 200;

// The height of a node whose children are already built: one more than its tallest child.
int height_of(const Expr& e) {
  int h = 0;
  for_each_child(e, [&h](const Expr& c) { h = std::max(h, c.height); });
  return h + 1;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::unique_ptr<Program> parse() {
    auto program = std::make_unique<Program>();
    program->body = subparse({});
    return program;
  }

 private:
  // ---- token stream -------------------------------------------------------------------------------------
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const Token& t, std::string_view op) const {
    return t.type == TokenType::kOperator && t.value == op;
  }
  bool is_name(const Token& t, std::string_view name) const {
    return t.type == TokenType::kName && t.value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(cur(), op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(cur(), name)) return false;
    advance();
    return true;
  }

  [[noreturn]] void fail(const std::string& message, int line = 0) const {
    throw TemplateError(TemplateError::Kind::kSyntax, message, line > 0 ? line : cur().line);
  }

  static std::string describe_token(const Token& t) {
    switch (t.type) {
      case TokenType::kName:
      case TokenType::kOperator:
        return t.value;
      default:
        return describe(t.type);
    }
  }

  void expect_op(std::string_view op) {
    if (!is_op(cur(), op)) {
      if (cur().type == TokenType::kEof) fail_eof({});
      fail("expected token '" + std::string(op) + "', got '" + describe_token(cur()) + "'");
    }
    advance();
  }

  void expect_type(TokenType type) {
    if (cur().type != type) {
      if (cur().type == TokenType::kEof) fail_eof({});
      fail(std::string("expected token '") + describe(type) + "', got '" + describe_token(cur()) + "'");
    }
    advance();
  }

  std::string expect_name() {
    if (cur().type != TokenType::kName) {
      if (cur().type == TokenType::kEof) fail_eof({});
      fail("expected token 'name', got '" + describe_token(cur()) + "'");
    }
    return advance().value;
  }

  [[noreturn]] void fail_eof(const std::vector<std::string>& end_tokens) const {
    std::vector<std::vector<std::string>> stack = end_stack_;
    if (!end_tokens.empty()) stack.push_back(end_tokens);
    std::string message = "Unexpected end of template.";
    if (!stack.empty()) {
      message += " Jinja was looking for the following tags: " + join_quoted(stack.back()) + ".";
    }
    if (!tag_stack_.empty())
      message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(message, cur().line);
  }

  static std::string join_quoted(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) out += " or ";
      out += "'" + names[i] + "'";
    }
    return out;
  }

  // ---- statements ---------------------------------------------------------------------------------------
  Body subparse(const std::vector<std::string>& end_tokens) {
    Body body;
    std::unique_ptr<OutputStmt> output;
    auto flush = [&] {
      if (output) body.push_back(std::move(output));
    };
    auto output_part = [&](int line) -> OutputStmt::Part& {
      if (!output) output = std::make_unique<OutputStmt>(line);
      return output->parts.emplace_back();
    };
    if (!end_tokens.empty()) end_stack_.push_back(end_tokens);
    while (cur().type != TokenType::kEof) {
      const Token& t = cur();
      if (t.type == TokenType::kData) {
        output_part(t.line).text = t.value;
        advance();
      } else if (t.type == TokenType::kVariableBegin) {
        const int line = t.line;
        advance();
        output_part(line).expr = parse_tuple(false, true, {}, false);
        expect_type(TokenType::kVariableEnd);
      } else if (t.type == TokenType::kBlockBegin) {
        flush();
        advance();
        if (cur().type == TokenType::kName &&
            std::find(end_tokens.begin(), end_tokens.end(), cur().value) != end_tokens.end()) {
          end_stack_.pop_back();
          return body;
        }
        parse_statement(body);
        expect_type(TokenType::kBlockEnd);
      } else {
        fail("unexpected '" + describe_token(t) + "'");
      }
    }
    flush();
    if (!end_tokens.empty()) end_stack_.pop_back();
    return body;
  }

  Body parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
    skip_op(":");
    expect_type(TokenType::kBlockEnd);
    Body body = subparse(end_tokens);
    if (cur().type == TokenType::kEof) fail_eof(end_tokens);
    if (drop_needle) advance();
    return body;
  }

  void parse_statement(Body& body) {
    const Token& t = cur();
    if (t.type != TokenType::kName) fail("tag name expected");
    const std::string tag = t.value;
    const int line = t.line;
    static const char* const kUnsupported[] = {"block", "extends", "include", "import", "from", "autoescape"};
    for (const char* name : kUnsupported) {
      if (tag == name) fail("tag '" + tag + "' is not supported in chat templates", line);
    }
    DepthGuard guard(*this, "blocks nested too deeply");
    tag_stack_.push_back(tag);
    if (tag == "for") {
      body.push_back(parse_for());
    } else if (tag == "if") {
      body.push_back(parse_if());
    } else if (tag == "set") {
      body.push_back(parse_set());
    } else if (tag == "macro") {
      body.push_back(parse_macro());
    } else if (tag == "call") {
      body.push_back(parse_call_block());
    } else if (tag == "filter") {
      body.push_back(parse_filter_block(false));
    } else if (tag == "generation") {
      // Hugging Face's AssistantTracker tag only marks assistant spans; it renders its body like a call
      // block.
      body.push_back(parse_filter_block(true));
    } else if (tag == "with") {
      body.push_back(parse_with());
    } else if (tag == "print") {
      body.push_back(parse_print());
    } else if (tag == "break" || tag == "continue") {
      advance();
      if (loop_depth_ == 0) fail("'" + tag + "' outside loop", line);
      body.push_back(std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line));
    } else {
      tag_stack_.pop_back();
      std::string message = "Encountered unknown tag '" + tag + "'.";
      if (!end_stack_.empty()) {
        const auto& expected = end_stack_.back();
        bool nesting = false;
        for (const auto& level : end_stack_) {
          nesting |= std::find(level.begin(), level.end(), tag) != level.end();
        }
        message += nesting
                       ? " You probably made a nesting mistake. Jinja is expecting this tag, but currently "
                         "looking for " +
                             join_quoted(expected) + "."
                       : " Jinja was looking for the following tags: " + join_quoted(expected) + ".";
      }
      if (!tag_stack_.empty())
        message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
      fail(message, line);
    }
    tag_stack_.pop_back();
  }

  StmtPtr parse_for() {
    auto node = std::make_unique<ForStmt>(advance().line);
    node->target = parse_assign_target(true, false, {"in"}, false);
    if (!skip_name("in")) fail("expected token 'in', got '" + describe_token(cur()) + "'");
    node->iterable = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    if (is_name(cur(), "recursive")) fail("recursive for loops are not supported");
    ++loop_depth_;
    node->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (advance().value != "endfor") node->otherwise = parse_statements({"endfor"}, true);
    return node;
  }

  StmtPtr parse_if() {
    auto node = std::make_unique<IfStmt>(advance().line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const std::string tag = advance().value;
      if (tag == "elif") continue;
      if (tag == "else") node->otherwise = parse_statements({"endif"}, true);
      break;
    }
    return node;
  }

  StmtPtr parse_set() {
    const int line = advance().line;
    Target target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto node = std::make_unique<SetStmt>(line);
      node->target = std::move(target);
      node->value = parse_tuple(false, true, {}, false);
      return node;
    }
    auto node = std::make_unique<SetBlockStmt>(line);
    node->target = std::move(target);
    node->filters = parse_block_filters(false);
    node->body = parse_statements({"endset"}, true);
    return node;
  }

  void parse_signature(MacroDef& def) {
    expect_op("(");
    while (!is_op(cur(), ")")) {
      if (!def.params.empty()) expect_op(",");
      def.params.push_back(expect_name());
      if (skip_op("=")) {
        def.defaults.push_back(parse_expression(true));
      } else if (!def.defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  // Macro bodies are functions in jinja2: loop controls inside refer to loops inside the body only.
  Body parse_macro_body(MacroDef& def, const char* end_tag) {
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    macro_stack_.push_back(&def);
    Body body = parse_statements({end_tag}, true);
    macro_stack_.pop_back();
    loop_depth_ = saved_loop_depth;
    return body;
  }

  StmtPtr parse_macro() {
    auto node = std::make_unique<MacroStmt>(advance().line);
    node->def = std::make_unique<MacroDef>();
    node->def->line = node->line;
    node->def->name = expect_name();
    parse_signature(*node->def);
    node->def->body = parse_macro_body(*node->def, "endmacro");
    return node;
  }

  StmtPtr parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(advance().line);
    node->caller = std::make_unique<MacroDef>();
    node->caller->name = "caller";
    node->caller->line = node->line;
    if (is_op(cur(), "(")) parse_signature(*node->caller);
    ExprPtr call = parse_expression(true);
    if (call->kind != ExprKind::kCall) fail("expected call", node->line);
    node->call.reset(static_cast<CallExpr*>(call.release()));
    node->caller->body = parse_macro_body(*node->caller, "endcall");
    return node;
  }

  StmtPtr parse_filter_block(bool generation) {
    auto node = std::make_unique<FilterBlockStmt>(advance().line);
    if (!generation) node->filters = parse_block_filters(true);
    node->body = parse_statements({generation ? "endgeneration" : "endfilter"}, true);
    return node;
  }

  StmtPtr parse_with() {
    auto node = std::make_unique<WithStmt>(advance().line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!node->targets.empty()) expect_op(",");
      node->targets.push_back(parse_assign_target(true, false, {}, false));
      expect_op("=");
      node->values.push_back(parse_expression(true));
    }
    node->body = parse_statements({"endwith"}, true);
    return node;
  }

  StmtPtr parse_print() {
    auto node = std::make_unique<OutputStmt>(advance().line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!node->parts.empty()) expect_op(",");
      node->parts.emplace_back().expr = parse_expression(true);
    }
    return node;
  }

  Target parse_assign_target(bool with_tuple, bool name_only, const std::vector<std::string>& extra_end,
                             bool with_namespace) {
    Target target;
    target.line = cur().line;
    if (with_namespace && look().type == TokenType::kOperator && look().value == ".") {
      target.kind = Target::Kind::kNamespaceAttr;
      target.name = expect_name();
      advance();
      target.attr = expect_name();
      return target;
    }
    if (name_only) {
      target.name = expect_name();
      return target;
    }
    ++assign_target_depth_;
    ExprPtr expr = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    --assign_target_depth_;
    return to_target(*expr);
  }

  Target to_target(const Expr& expr) {
    Target target;
    target.line = expr.line;
    if (expr.kind == ExprKind::kName) {
      target.name = static_cast<const NameExpr&>(expr).name;
      return target;
    }
    if (expr.kind == ExprKind::kList && static_cast<const ListExpr&>(expr).tuple) {
      target.kind = Target::Kind::kTuple;
      for (const auto& item : static_cast<const ListExpr&>(expr).items)
        target.items.push_back(to_target(*item));
      return target;
    }
    fail(std::string("can't assign to '") + (expr.kind == ExprKind::kConst ? "const" : "expression") + "'",
         expr.line);
  }

  // ---- expressions --------------------------------------------------------------------------------------
  struct DepthGuard {
    explicit DepthGuard(Parser& p, const char* what = "expression nested too deeply") : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.fail(what);
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // Every node is sealed once its children are in place: its height is known before anything wraps it, so
  // a chain built in a loop stops at the bound instead of growing a tree that recursion cannot walk.
  template <class T>
  std::unique_ptr<T> seal(std::unique_ptr<T> node) {
    node->height = height_of(*node);
    if (node->height > kMaxNesting) fail("expression nested too deeply");
    return node;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    int line = cur().line;
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto cond = std::make_unique<CondExpr>(line);
      cond->then = std::move(expr);
      cond->test = parse_or();
      if (skip_name("else")) cond->otherwise = parse_condexpr();
      expr = seal(std::move(cond));
      line = cur().line;
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name(cur(), "or")) {
      const int line = advance().line;
      left = seal(
          std::make_unique<BinaryExpr>(ExprKind::kOr, BinaryOp::kAdd, std::move(left), parse_and(), line));
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name(cur(), "and")) {
      const int line = advance().line;
      left = seal(
          std::make_unique<BinaryExpr>(ExprKind::kAnd, BinaryOp::kAdd, std::move(left), parse_not(), line));
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name(cur(), "not")) {
      DepthGuard guard(*this);
      const int line = advance().line;
      return seal(std::make_unique<UnaryExpr>(ExprKind::kNot, parse_not(), line));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr expr = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CompareOp op;
      const Token& t = cur();
      if (t.type == TokenType::kOperator && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                             t.value == "<=" || t.value == ">" || t.value == ">=")) {
        op = t.value == "=="   ? CompareOp::kEq
             : t.value == "!=" ? CompareOp::kNe
             : t.value == "<"  ? CompareOp::kLt
             : t.value == "<=" ? CompareOp::kLe
             : t.value == ">"  ? CompareOp::kGt
                               : CompareOp::kGe;
        advance();
      } else if (is_name(t, "in")) {
        op = CompareOp::kIn;
        advance();
      } else if (is_name(t, "not") && is_name(look(), "in")) {
        op = CompareOp::kNotIn;
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) cmp = std::make_unique<CompareExpr>(std::move(expr), line);
      cmp->rest.emplace_back(op, parse_math1());
    }
    if (cmp) return seal(std::move(cmp));
    return expr;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op(cur(), "+") || is_op(cur(), "-")) {
      const Token& t = advance();
      const BinaryOp op = t.value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
      left =
          seal(std::make_unique<BinaryExpr>(ExprKind::kBinary, op, std::move(left), parse_concat(), t.line));
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op(cur(), "~")) return first;
    auto concat = std::make_unique<ConcatExpr>(line);
    concat->parts.push_back(std::move(first));
    while (skip_op("~")) concat->parts.push_back(parse_math2());
    return seal(std::move(concat));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op(cur(), "*") || is_op(cur(), "/") || is_op(cur(), "//") || is_op(cur(), "%")) {
      const Token& t = advance();
      const BinaryOp op = t.value == "*"    ? BinaryOp::kMul
                          : t.value == "/"  ? BinaryOp::kDiv
                          : t.value == "//" ? BinaryOp::kFloorDiv
                                            : BinaryOp::kMod;
      left = seal(std::make_unique<BinaryExpr>(ExprKind::kBinary, op, std::move(left), parse_pow(), t.line));
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op(cur(), "**")) {
      const int line = advance().line;
      left = seal(std::make_unique<BinaryExpr>(ExprKind::kBinary, BinaryOp::kPow, std::move(left),
                                               parse_unary(true), line));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op(cur(), "-") || is_op(cur(), "+")) {
      const Token& t = advance();
      node = seal(std::make_unique<UnaryExpr>(t.value == "-" ? ExprKind::kNeg : ExprKind::kPos,
                                              parse_unary(false), t.line));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = cur();
    switch (t.type) {
      case TokenType::kName: {
        advance();
        if (t.value == "true" || t.value == "True")
          return std::make_unique<ConstExpr>(Value::boolean(true), t.line);
        if (t.value == "false" || t.value == "False")
          return std::make_unique<ConstExpr>(Value::boolean(false), t.line);
        if (t.value == "none" || t.value == "None") return std::make_unique<ConstExpr>(Value::none(), t.line);
        note_name(t.value);
        return std::make_unique<NameExpr>(t.value, t.line);
      }
      case TokenType::kString: {
        const int line = t.line;
        std::string s;
        while (cur().type == TokenType::kString) s += advance().value;
        return std::make_unique<ConstExpr>(Value::string(std::move(s)), line);
      }
      case TokenType::kInteger:
        advance();
        return std::make_unique<ConstExpr>(Value::integer(t.int_value), t.line);
      case TokenType::kFloat:
        advance();
        return std::make_unique<ConstExpr>(Value::number(t.float_value), t.line);
      case TokenType::kOperator:
        if (t.value == "(") {
          advance();
          ExprPtr node = parse_tuple(false, true, {}, true);
          expect_op(")");
          return node;
        }
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      case TokenType::kEof:
        fail_eof({});
      default:
        break;
    }
    fail("unexpected '" + describe_token(t) + "'");
  }

  void note_name(const std::string& name) {
    if (assign_target_depth_ > 0) return;
    for (MacroDef* def : macro_stack_) {
      if (name == "varargs") def->uses_varargs = true;
      if (name == "kwargs") def->uses_kwargs = true;
      if (name == "caller") def->uses_caller = true;
    }
  }

  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || is_op(t, ")")) return true;
    return t.type == TokenType::kName &&
           std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                      bool explicit_parentheses) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      if (simplified) {
        args.push_back(parse_primary());
      } else {
        args.push_back(parse_expression(with_condexpr));
      }
      if (is_op(cur(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses) {
        if (cur().type == TokenType::kEof) fail_eof({});
        fail("Expected an expression, got '" + describe_token(cur()) + "'");
      }
    }
    auto tuple = std::make_unique<ListExpr>(true, line);
    tuple->items = std::move(args);
    return seal(std::move(tuple));
  }

  ExprPtr parse_list() {
    auto node = std::make_unique<ListExpr>(false, advance().line);
    while (!is_op(cur(), "]")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op(cur(), "]")) break;
      node->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return seal(std::move(node));
  }

  ExprPtr parse_dict() {
    auto node = std::make_unique<DictExpr>(advance().line);
    while (!is_op(cur(), "}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op(cur(), "}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      ExprPtr value = parse_expression(true);
      node->items.emplace_back(std::move(key), std::move(value));
    }
    expect_op("}");
    return seal(std::move(node));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(cur(), ".") || is_op(cur(), "[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op(cur(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (skip_op("|")) {
        node = parse_filter_link(std::move(node));
      } else if (is_name(cur(), "is")) {
        node = parse_test(std::move(node));
      } else if (is_op(cur(), "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = advance();
    const int line = t.line;
    if (t.value == ".") {
      const Token& attr = advance();
      if (attr.type == TokenType::kName)
        return seal(std::make_unique<GetattrExpr>(std::move(node), attr.value, line));
      if (attr.type != TokenType::kInteger) fail("expected name or number", attr.line);
      return seal(std::make_unique<GetitemExpr>(
          std::move(node), std::make_unique<ConstExpr>(Value::integer(attr.int_value), attr.line), line));
    }
    std::vector<ExprPtr> args;
    while (!is_op(cur(), "]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() == 1)
      return seal(std::make_unique<GetitemExpr>(std::move(node), std::move(args[0]), line));
    auto tuple = std::make_unique<ListExpr>(true, line);
    tuple->items = std::move(args);
    return seal(std::make_unique<GetitemExpr>(std::move(node), seal(std::move(tuple)), line));
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    auto slice = std::make_unique<SliceExpr>(line);
    if (!skip_op(":")) {
      ExprPtr node = parse_expression(true);
      if (!skip_op(":")) return node;
      slice->start = std::move(node);
    }
    if (!is_op(cur(), ":") && !is_op(cur(), "]") && !is_op(cur(), ",")) slice->stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op(cur(), "]") && !is_op(cur(), ",")) slice->step = parse_expression(true);
    }
    return seal(std::move(slice));
  }

  CallArgs parse_call_args() {
    const int line = cur().line;
    expect_op("(");
    CallArgs args;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", line);
    };
    while (!is_op(cur(), ")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(cur(), ")")) break;
      }
      if (skip_op("*")) {
        ensure(!args.star_args && !args.star_kwargs);
        args.star_args = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!args.star_kwargs);
        args.star_kwargs = parse_expression(true);
      } else if (cur().type == TokenType::kName && look().type == TokenType::kOperator &&
                 look().value == "=") {
        ensure(!args.star_kwargs);
        std::string key = advance().value;
        advance();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!args.star_args && !args.star_kwargs && args.keyword.empty());
        args.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr node) {
    auto call = std::make_unique<CallExpr>(std::move(node), cur().line);
    call->args = parse_call_args();
    return seal(std::move(call));
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  std::unique_ptr<FilterExpr> parse_filter_link(ExprPtr input) {
    const int line = cur().line;
    std::string name = parse_dotted_name();
    auto filter = std::make_unique<FilterExpr>(std::move(input), std::move(name), line);
    if (is_op(cur(), "(")) filter->args = parse_call_args();
    return seal(std::move(filter));
  }

  // The filters of {% filter f|g %} (start_inline: no leading pipe) or {% set x | f %}, applied in order to
  // the rendered block; each link has a null input.
  std::vector<std::unique_ptr<FilterExpr>> parse_block_filters(bool start_inline) {
    std::vector<std::unique_ptr<FilterExpr>> chain;
    while (start_inline || skip_op("|")) {
      start_inline = false;
      chain.push_back(parse_filter_link(nullptr));
    }
    return chain;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = advance().line;
    const bool negated = skip_name("not");
    std::string name = parse_dotted_name();
    auto test = std::make_unique<TestExpr>(std::move(node), std::move(name), line);
    const Token& t = cur();
    if (is_op(t, "(")) {
      test->args = parse_call_args();
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
                t.type == TokenType::kFloat || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
      if (is_name(t, "is")) fail("You cannot chain multiple tests with is");
      test->args.positional.push_back(parse_postfix(parse_primary()));
    }
    if (negated) return seal(std::make_unique<UnaryExpr>(ExprKind::kNot, seal(std::move(test)), line));
    return seal(std::move(test));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int assign_target_depth_ = 0;
  std::vector<std::vector<std::string>> end_stack_;
  std::vector<std::string> tag_stack_;
  std::vector<MacroDef*> macro_stack_;
};

}  // namespace

std::unique_ptr<Program> parse_template(std::string_view source) {
  auto program = Parser(tokenize(source)).parse();
  check_filter_and_test_names(*program);
  return program;
}

}  // namespace spark::jinja
