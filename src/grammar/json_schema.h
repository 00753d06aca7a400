// JSON Schema -> grammar. Supported: type (one or a list, null included), properties / required /
// additionalProperties (bool or schema), patternProperties and propertyNames (a name's automata run
// together: the patterns it matches pick its value's schema), minProperties / maxProperties, items /
// prefixItems (and draft-4 tuple items / additionalItems), minItems / maxItems, enum / const (every sibling
// keyword checked on the listed values), anyOf / oneOf (as alternatives), allOf (merged), not where exact
// (not {}, {not}, {type}, {enum / const} of strings, booleans and null, {required: [one name]}), $ref to #,
// #/$defs/..., #/definitions/... or any JSON pointer in the document (recursion included), string
// minLength / maxLength / pattern / format (date-time, date, time, email, uuid, uri, ipv4, ipv6, hostname;
// other formats are annotations; several of them on one string are intersected), integer and number
// bounds (decimal, inclusive and exclusive, draft 4 and later forms; a side without a bound stops at 16
// digits, what clients parsing numbers as doubles hold; a bounded number with a fraction has at most 15
// significant digits, so that as a double too it lies within the bounds). Properties come in the
// schema's order, optional ones may be skipped, additional ones come after the declared ones. Whitespace
// goes where JSON allows it, in runs of a bounded length.
//
// A keyword that would change which instances are valid and that the grammar cannot enforce is a compile
// error naming it (spark::Error), never silently dropped. Annotations (title, description, examples,
// unknown keywords) are ignored.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>

#include "grammar/grammar.h"
#include "spark/error.h"
#include "util/lru_cache.h"

namespace spark::grammar {

struct JsonSchemaOptions {
  int max_whitespace = 24;  // bytes in one whitespace run
  // Strings never hold a raw `<` (only its escape \u003c), for JSON embedded in markup whose tags start
  // with it (the tool-call syntax). A pattern that needs a raw `<` then matches nothing.
  bool escape_lt = false;
};

// JSON Schema instances as expressions of a grammar being built (for grammars that embed them, like the
// tool-call syntax). `root` (kept alive by the caller while the embedder lives) is the document $refs
// resolve in; the schemas given are parts of it.
class JsonSchemaEmbedder {
 public:
  JsonSchemaEmbedder(GrammarBuilder& b, const nlohmann::ordered_json& root, const JsonSchemaOptions& options);
  ~JsonSchemaEmbedder();
  // An instance written as JSON. Throws spark::Error naming a keyword it cannot enforce.
  ExprId value(const nlohmann::ordered_json& schema, const std::string& path);
  // A string instance written as its bare text (no quotes or escapes, never a `<`); the schema must allow
  // strings only (type "string", or an enum / const of strings).
  ExprId raw_string(const nlohmann::ordered_json& schema, const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A keyword holding a JSON type the compiler did not check for (nlohmann's type_error inside it): still a
// refusal like any spark::Error (the server's 400), but a gap in the compiler's checks that the fuzz
// harnesses report (bug 18).
class UncheckedSchemaType : public Error {
 public:
  using Error::Error;
};

// `schema_json`: the schema's text (its key order gives the property order).
Grammar compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options = {});
// Any JSON object ({"type": "json_object"}).
Grammar json_object_grammar(const JsonSchemaOptions& options = {});
// Any of the given strings, exactly.
Grammar choice_grammar(const std::vector<std::string>& choices);
// A regular expression matched in full.
Grammar regex_grammar(std::string_view pattern);

// The automata of length-bounded strings, by (min, max, raw), shared by every schema of the process
// (64 MiB at most, least recently used out first). A grammar keeps its own copy of the states it embeds,
// so a table leaving the cache never leaves a grammar without them.
using DfaTableCache = util::LruCache<std::tuple<int, int, bool>, std::shared_ptr<const DfaTable>>;
DfaTableCache& counted_string_tables();

}  // namespace spark::grammar
