// The values a template computes with, modelled on the Python objects jinja2 sees when Hugging Face renders a
// chat template: None, bool, int, float, str, list/tuple, dict (insertion-ordered), jinja2's Undefined,
// namespace(), the loop object, generators (what |selectattr and friends return) and callables.
// Containers are immutable once built (the immutable sandbox forbids list.append and friends), so they are
// shared by pointer; only namespaces and the loop object change in place.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "util/name_index.h"

namespace spark::jinja {

class Value;
class Interpreter;
struct CallValues;

// A runtime failure inside the template; the interpreter adds the template line and converts it to a
// TemplateError. kRaised marks raise_exception(), whose message is the template author's own text; kLimit
// marks the output-size, recursion and step guards.
class RenderError : public std::runtime_error {
 public:
  enum class Kind { kRuntime, kRaised, kLimit };
  explicit RenderError(const std::string& message, Kind kind = Kind::kRuntime)
      : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// How a sequence prints (Python repr) and compares; all of them iterate the same way.
enum class SeqKind { kList, kTuple, kDictItems, kDictKeys, kDictValues };

// Lists, dicts, generators and loop objects nest at most this deep (a namespace inside counts as a leaf).
// Printing, comparing, serializing and destroying a value all recurse once per level, so a template that
// wraps a value in a loop (`{% set ns.x = [ns.x] %}` a million times) must stop with an error, not overflow
// the stack. JSON inputs stop earlier (Value::from_json: 512).
constexpr int kMaxNesting = 1000;

struct ListData {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
  int depth = 1;  // set by Value::list: 1 + the deepest item's nesting
};

// An insertion-ordered str -> value map (JSON objects and dict literals; Python dicts keep insertion order).
class DictData {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const;  // defined below Value: vector<pair<..., Value>>::size needs the complete type
  int depth() const { return depth_; }

 private:
  friend class Value;
  std::vector<std::pair<std::string, Value>> entries_;
  util::NameIndex index_;
  int depth_ = 1;  // set by Value::dict: 1 + the deepest value's nesting
};

struct NamespaceData {
  DictData attrs;
};

// A one-shot iterator: jinja2's select/map/reverse filters return generators, which are always truthy, have
// no length and are exhausted by the first loop over them.
struct GeneratorData {
  std::vector<Value> items;
  size_t position = 0;
  int depth = 1;  // set by Value::generator, as ListData::depth
};

struct LoopData {
  std::vector<Value> items;
  int depth = 1;  // set by Value::loop from the items (last_changed is cleared when the loop ends)
  size_t index0 = 0;
  std::vector<Value> last_changed;
  bool changed_called = false;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Interpreter& interp, CallValues& args) const = 0;
  // Python repr, e.g. "<Macro 'render'>".
  virtual std::string repr() const = 0;
  virtual std::string python_type() const { return "builtin_function_or_method"; }
};

// What jinja2 raises when the value is used: "'foo' is undefined", or the sandbox's "access to attribute
// 'append' of 'list' object is unsafe." for attributes it forbids.
struct UndefinedData {
  std::string message;
};

class Value {
 public:
  enum class Type {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable,
    kLoop,
    kGenerator
  };

  Value() = default;  // undefined, no hint
  static Value undefined(std::string message);
  static Value none() { return Value(Storage(std::in_place_index<1>, NoneTag{})); }
  static Value boolean(bool b) { return Value(Storage(std::in_place_index<2>, b)); }
  static Value integer(int64_t i) { return Value(Storage(std::in_place_index<3>, i)); }
  static Value number(double d) { return Value(Storage(std::in_place_index<4>, d)); }
  static Value string(std::string s);
  // These four throw a RenderError (kLimit) beyond kMaxNesting.
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value dict(DictData d);
  static Value namespace_object(std::shared_ptr<NamespaceData> ns);
  static Value loop(std::shared_ptr<LoopData> loop);  // its items already set
  static Value generator(std::vector<Value> items);
  static Value callable(std::shared_ptr<const Callable> fn);
  static Value from_json(const nlohmann::ordered_json& j, int depth = 0);

  Type type() const { return static_cast<Type>(storage_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  // Python ints include bools.
  bool is_integral() const { return is_int() || is_bool(); }
  bool is_number() const { return is_int() || is_bool() || is_float(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  bool is_namespace() const { return type() == Type::kNamespace; }
  bool is_callable() const { return type() == Type::kCallable; }
  bool is_loop() const { return type() == Type::kLoop; }
  bool is_generator() const { return type() == Type::kGenerator; }

  bool as_bool() const { return std::get<2>(storage_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<3>(storage_); }
  double as_float() const { return is_float() ? std::get<4>(storage_) : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *std::get<5>(storage_); }
  const ListData& as_list() const { return *std::get<6>(storage_); }
  const DictData& as_dict() const { return *std::get<7>(storage_); }
  NamespaceData& as_namespace() const { return *std::get<8>(storage_); }
  const Callable& as_callable() const { return *std::get<9>(storage_); }
  LoopData& as_loop() const { return *std::get<10>(storage_); }
  GeneratorData& as_generator() const { return *std::get<11>(storage_); }

  // The message jinja2 would raise for an operation on this undefined value.
  std::string undefined_message() const;
  // Identity for `is sameas` and for equality of mutable objects.
  const void* identity() const;
  // Levels of lists, dicts, generators and loop objects: 0 for anything else.
  int nesting() const;

 private:
  struct NoneTag {};
  using Storage = std::variant<std::shared_ptr<const UndefinedData>, NoneTag, bool, int64_t, double,
                               std::shared_ptr<const std::string>, std::shared_ptr<const ListData>,
                               std::shared_ptr<const DictData>, std::shared_ptr<NamespaceData>,
                               std::shared_ptr<const Callable>, std::shared_ptr<LoopData>,
                               std::shared_ptr<GeneratorData>>;
  explicit Value(Storage s) : storage_(std::move(s)) {}
  Storage storage_;
};

inline size_t DictData::size() const {
  return entries_.size();
}

// Positional and keyword arguments of a call, filter or test, already evaluated.
struct CallValues {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Python semantics used throughout the engine.
std::string type_name(const Value& v);         // "str", "int", "NoneType", "dict", ...
std::string object_type_repr(const Value& v);  // jinja2's "'dict object'" phrasing, without the quotes
bool truthy(const Value& v);
// Containers print element by element, and shared elements print once per reference: the printed text
// is bounded as it grows (the interpreter passes its output limit; elsewhere this).
inline constexpr size_t kMaxPrintBytes = size_t{256} << 20;

// A list holding one large string 60 times prints 60 copies: printed text (str, repr, tojson) is checked
// as it grows, not after (a 3.6 GB string before the check). Throws a kLimit RenderError past max_bytes.
[[noreturn]] void throw_print_size(size_t max_bytes);
inline void check_print_size(size_t size, size_t max_bytes) {
  if (size > max_bytes) throw_print_size(max_bytes);  // inline: the escaping walks check per code point
}
// str(v): what {{ v }} prints; a container printed past max_bytes is a kLimit RenderError.
std::string to_str(const Value& v, size_t max_bytes = kMaxPrintBytes);
void append_str(const Value& v, std::string& out, size_t max_bytes = kMaxPrintBytes);
void append_repr(const Value& v, std::string& out, size_t max_bytes = kMaxPrintBytes);
// repr(v) inside an error message: cut at kMessageReprBytes with "..." (a key may be megabytes long).
inline constexpr size_t kMessageReprBytes = 1024;
std::string message_repr(const Value& v);
// A name or text inside an error message, cut the same way (at a UTF-8 character boundary).
std::string message_text(std::string_view s);
std::string format_float(double d);  // float.__repr__
bool equals(const Value& a, const Value& b);
// a < b with Python's rules; throws RenderError for unorderable types.
bool less_than(const Value& a, const Value& b, const char* op_for_message);
// Materializes anything iterable into its items (dict -> keys, str -> characters); throws if not iterable.
// Iterating a generator exhausts it.
std::vector<Value> iterate(const Value& v);
// len(v); throws for values without a length (generators, numbers, None).
size_t length_of(const Value& v);
// Python's hashability: lists, dicts and dict views are not hashable, tuples are when their items are.
bool is_hashable(const Value& v);
// Throws jinja2's UndefinedError (or the sandbox's SecurityError) for an undefined value, else does nothing.
void fail_if_undefined(const Value& v);

}  // namespace spark::jinja
