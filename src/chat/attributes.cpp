// Attribute and item lookup as jinja2's ImmutableSandboxedEnvironment does it, and the bound methods of
// dict, list, tuple and the loop object.
#include <algorithm>
#include <iterator>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/methods.h"
#include "chat/unicode.h"

namespace spark::jinja {

namespace {

constexpr const char* kDictAttributes[] = {"clear", "copy",    "fromkeys",   "get",    "items", "keys",
                                           "pop",   "popitem", "setdefault", "update", "values"};
// The immutable sandbox refuses methods that modify a container.
constexpr const char* kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr const char* kListAttributes[] = {"append", "clear", "copy",   "count",   "extend", "index",
                                           "insert", "pop",   "remove", "reverse", "sort"};
constexpr const char* kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                       "pop",    "remove", "reverse", "sort"};
constexpr const char* kTupleAttributes[] = {"count", "index"};

template <size_t N>
bool in_list(const char* const (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
}

Value missing_attribute(const Value& obj, const std::string& name) {
  // Built with append: GCC 12 reports a false -Wrestrict on the equivalent operator+ chain.
  std::string message = "'";
  message.append(object_type_repr(obj)).append("' has no attribute '").append(message_text(name)).append("'");
  return Value::undefined(std::move(message));
}

Value missing_element(const Value& obj, const Value& key) {
  return Value::undefined(object_type_repr(obj) + " has no element " + message_repr(key));
}

class MethodCallable : public Callable {
 public:
  MethodCallable(Value receiver, std::string name) : receiver_(std::move(receiver)), name_(std::move(name)) {}
  Value call(Interpreter& interp, CallValues& args) const override;
  std::string repr() const override {
    return "<built-in method " + name_ + " of " + type_name(receiver_) + " object>";
  }

 private:
  Value receiver_;
  std::string name_;
};

Value call_dict_method(const DictData& d, const Value& self, std::string_view name, CallValues& args) {
  const std::string fn = "dict." + std::string(name);
  if (name == "get") {
    auto a = bind_args(fn, args, {"key", "default"}, 1);
    if (!is_hashable(*a[0])) throw RenderError("unhashable type: '" + type_name(*a[0]) + "'");
    const Value* v = a[0]->is_string() ? d.find(a[0]->as_string()) : nullptr;
    if (v != nullptr) return *v;
    return a[1] ? *a[1] : Value::none();
  }
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(fn, args, {});
    std::vector<Value> items;
    items.reserve(d.size());
    for (const auto& [key, value] : d.entries()) {
      if (name == "items") {
        items.push_back(Value::list({Value::string(key), value}, SeqKind::kTuple));
      } else {
        items.push_back(name == "keys" ? Value::string(key) : value);
      }
    }
    const SeqKind kind = name == "items"  ? SeqKind::kDictItems
                         : name == "keys" ? SeqKind::kDictKeys
                                          : SeqKind::kDictValues;
    return Value::list(std::move(items), kind);
  }
  if (name == "copy") {
    bind_args(fn, args, {});
    return self;
  }
  throw RenderError(fn + "() is not supported in chat templates");
}

Value call_list_method(const ListData& l, const Value& self, std::string_view name, CallValues& args) {
  const std::string fn = type_name(self) + "." + std::string(name);
  if (name == "count") {
    auto a = bind_args(fn, args, {"value"}, 1);
    return Value::integer(
        std::count_if(l.items.begin(), l.items.end(), [&](const Value& v) { return equals(v, *a[0]); }));
  }
  if (name == "index") {
    auto a = bind_args(fn, args, {"value"}, 1);
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (equals(l.items[i], *a[0])) return Value::integer(static_cast<int64_t>(i));
    }
    throw RenderError(l.kind == SeqKind::kTuple ? "tuple.index(x): x not in tuple"
                                                : message_repr(*a[0]) + " is not in list");
  }
  if (name == "copy") {
    bind_args(fn, args, {});
    return self;
  }
  throw RenderError(fn + "() is not supported in chat templates");
}

Value call_loop_method(LoopData& loop, std::string_view name, CallValues& args) {
  if (!args.keyword.empty()) throw RenderError("loop." + std::string(name) + "() takes no keyword arguments");
  if (name == "cycle") {
    if (args.positional.empty()) throw RenderError("no items for cycling given");
    return args.positional[loop.index0 % args.positional.size()];
  }
  // changed(*values): true when the values differ from the previous call's (and on the first call).
  const bool same =
      loop.changed_called && loop.last_changed.size() == args.positional.size() &&
      std::equal(loop.last_changed.begin(), loop.last_changed.end(), args.positional.begin(), equals);
  loop.changed_called = true;
  loop.last_changed = args.positional;
  return Value::boolean(!same);
}

Value MethodCallable::call(Interpreter& interp, CallValues& args) const {
  switch (receiver_.type()) {
    case Value::Type::kString:
      return call_str_method(interp, receiver_.as_string(), name_, args);
    case Value::Type::kDict:
      return call_dict_method(receiver_.as_dict(), receiver_, name_, args);
    case Value::Type::kList:
      return call_list_method(receiver_.as_list(), receiver_, name_, args);
    case Value::Type::kLoop:
      return call_loop_method(receiver_.as_loop(), name_, args);
    default:
      throw RenderError("'" + type_name(receiver_) + "' object has no method " + name_);
  }
}

std::optional<Value> loop_attribute(const Value& obj, const std::string& name) {
  const LoopData& loop = obj.as_loop();
  const auto length = static_cast<int64_t>(loop.items.size());
  const auto index0 = static_cast<int64_t>(loop.index0);
  if (name == "index") return Value::integer(index0 + 1);
  if (name == "index0") return Value::integer(index0);
  if (name == "revindex") return Value::integer(length - index0);
  if (name == "revindex0") return Value::integer(length - index0 - 1);
  if (name == "first") return Value::boolean(index0 == 0);
  if (name == "last") return Value::boolean(index0 + 1 == length);
  if (name == "length") return Value::integer(length);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") {
    if (index0 == 0) return Value::undefined("there is no previous item");
    return loop.items[loop.index0 - 1];
  }
  if (name == "nextitem") {
    if (index0 + 1 >= length) return Value::undefined("there is no next item");
    return loop.items[loop.index0 + 1];
  }
  if (name == "cycle" || name == "changed") return bound_method(obj, name);
  return std::nullopt;
}

std::optional<Value> python_attribute(const Value& obj, const std::string& name) {
  // Every Python object has dunder attributes; the sandbox refuses all of them.
  if (name.size() > 4 && name.compare(0, 2, "__") == 0 && name.compare(name.size() - 2, 2, "__") == 0) {
    return unsafe(obj, name);
  }
  switch (obj.type()) {
    case Value::Type::kString:
      if (is_str_attribute(name)) return bound_method(obj, name);
      break;
    case Value::Type::kDict:
      if (in_list(kDictUnsafe, name)) return unsafe(obj, name);
      if (in_list(kDictAttributes, name)) return bound_method(obj, name);
      break;
    case Value::Type::kList: {
      const SeqKind kind = obj.as_list().kind;
      if (kind == SeqKind::kList) {
        if (in_list(kListUnsafe, name)) return unsafe(obj, name);
        if (in_list(kListAttributes, name)) return bound_method(obj, name);
      } else if (kind == SeqKind::kTuple && in_list(kTupleAttributes, name)) {
        return bound_method(obj, name);
      }
      break;
    }
    case Value::Type::kNamespace: {
      const Value* v = obj.as_namespace().attrs.find(name);
      if (v != nullptr) return *v;
      break;
    }
    case Value::Type::kLoop:
      return loop_attribute(obj, name);
    default:
      break;
  }
  return std::nullopt;
}

std::optional<int64_t> sequence_index(int64_t i, size_t size) {
  const auto n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return i;
}

// Python's PySlice_AdjustIndices: the selected positions of a sequence of length n.
std::vector<size_t> slice_positions(size_t n_size, const Value* start, const Value* stop, const Value* step) {
  const auto n = static_cast<int64_t>(n_size);
  const int64_t st = step ? step->as_int() : 1;
  if (st == 0) throw RenderError("slice step cannot be zero");
  auto adjust = [&](const Value* v, int64_t fallback) {
    if (v == nullptr) return fallback;
    int64_t i = v->as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t b = adjust(start, st > 0 ? 0 : n - 1);
  const int64_t e = adjust(stop, st > 0 ? n : -1);
  std::vector<size_t> positions;
  if (st > 0) {
    for (int64_t i = b; i < e; i += st) positions.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = b; i > e; i += st) positions.push_back(static_cast<size_t>(i));
  }
  return positions;
}

}  // namespace

Value bound_method(const Value& receiver, std::string name) {
  return Value::callable(std::make_shared<MethodCallable>(receiver, std::move(name)));
}

Value get_python_attribute(const Value& obj, const std::string& name) {
  fail_if_undefined(obj);
  auto attr = python_attribute(obj, name);
  return attr ? *attr : missing_attribute(obj, name);
}

Value get_attribute(const Value& obj, const std::string& name) {
  fail_if_undefined(obj);
  if (auto attr = python_attribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    if (v != nullptr) return *v;
  }
  return missing_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  fail_if_undefined(obj);
  switch (obj.type()) {
    case Value::Type::kDict:
      if (key.is_string()) {
        const Value* v = obj.as_dict().find(key.as_string());
        if (v != nullptr) return *v;
      }
      break;
    case Value::Type::kList: {
      const ListData& l = obj.as_list();
      if ((l.kind == SeqKind::kList || l.kind == SeqKind::kTuple) && key.is_integral()) {
        if (auto i = sequence_index(key.as_int(), l.items.size())) return l.items[static_cast<size_t>(*i)];
      }
      break;
    }
    case Value::Type::kString:
      if (key.is_integral()) {
        const std::u32string u = to_u32(obj.as_string());
        if (auto i = sequence_index(key.as_int(), u.size())) {
          return Value::string(to_utf8(std::u32string_view(u).substr(static_cast<size_t>(*i), 1)));
        }
      }
      break;
    default:
      break;
  }
  if (key.is_string()) {
    if (auto attr = python_attribute(obj, key.as_string())) return *attr;
    return missing_attribute(obj, key.as_string());
  }
  return missing_element(obj, key);
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  // jinja2 compiles slices to a plain Python obj[a:b:c], bypassing the sandbox's forgiving getitem: every
  // failure here is an error, not an undefined value.
  fail_if_undefined(obj);
  const Value* bounds[] = {start, stop, step};
  for (const Value*& b : bounds) {
    if (b != nullptr && b->is_none()) b = nullptr;
    if (b != nullptr && !b->is_integral()) {
      throw RenderError("slice indices must be integers or None or have an __index__ method");
    }
  }
  if (obj.is_string()) {
    const std::u32string u = to_u32(obj.as_string());
    std::u32string out;
    for (size_t i : slice_positions(u.size(), bounds[0], bounds[1], bounds[2])) out += u[i];
    return Value::string(to_utf8(out));
  }
  if (obj.is_list() && (obj.as_list().kind == SeqKind::kList || obj.as_list().kind == SeqKind::kTuple)) {
    const ListData& l = obj.as_list();
    std::vector<Value> out;
    for (size_t i : slice_positions(l.items.size(), bounds[0], bounds[1], bounds[2]))
      out.push_back(l.items[i]);
    return Value::list(std::move(out), l.kind);
  }
  if (obj.is_dict()) throw RenderError("unhashable type: 'slice'");
  throw RenderError("'" + type_name(obj) + "' object is not subscriptable");
}

}  // namespace spark::jinja
