#include "util/bounded_json.h"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "util/name_index.h"

namespace spark {

std::optional<size_t> json_depth_violation(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

namespace {

// Builds an ordered_json in time linear in the text. nlohmann's own parser adds each member of an object
// through ordered_map::operator[], a scan of the members so far (ordered_map is a vector): an object of n
// keys took n^2/2 key comparisons, and one 2.3 MB request body of 200 000 keys took 44 s of a core. Here
// members are appended, and a repeated key is found through util::NameIndex (hashed past 16 members). Same
// result as nlohmann's parser: a repeated key keeps its first place and takes its last value.
class OrderedJsonBuilder {
 public:
  using Json = nlohmann::ordered_json;

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return put(Json(v)); }
  bool string(Json::string_t& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t& v) {
    const bool sub = v.has_subtype();
    const auto subtype = v.subtype();
    return put(sub ? Json::binary(std::move(v), subtype) : Json::binary(std::move(v)));
  }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(Json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // As nlohmann's DOM parser: the exception of the error's kind (parse_error 1xx, out_of_range 4xx).
    if (e.id / 100 == 4) throw static_cast<const Json::out_of_range&>(e);
    throw static_cast<const Json::parse_error&>(e);
  }

  Json take() { return std::move(root_); }

 private:
  struct Open {
    Json* value;
    util::NameIndex index;  // an object's members: a request's object may hold 200 000 keys
  };

  Json* put(Json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& top = open_.back();
    if (top.value->is_array()) {
      auto& a = top.value->get_ref<Json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    // The object's vector of members (ordered_map's operator[] is a scan of it).
    auto& members = static_cast<Json::object_t::Container&>(top.value->get_ref<Json::object_t&>());
    return &top.index.set(members, std::move(key_), std::move(v));
  }
  bool open(Json&& container) {
    open_.push_back({put(std::move(container)), {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  Json root_;
  std::string key_;
  std::vector<Open> open_;
};

template <class BasicJson>
BasicJson parse_unchecked(std::string_view text) {
  if constexpr (std::is_same_v<BasicJson, nlohmann::ordered_json>) {
    OrderedJsonBuilder builder;
    BasicJson::sax_parse(text, &builder);
    return builder.take();
  } else {
    return BasicJson::parse(text);
  }
}

}  // namespace

template <class BasicJson>
BasicJson parse_json_bounded(std::string_view text, int max_depth) {
  if (auto at = json_depth_violation(text, max_depth)) {
    throw nlohmann::json::parse_error::create(
        101, *at + 1, "syntax error: JSON nested deeper than " + std::to_string(max_depth) + " levels",
        nullptr);
  }
  return parse_unchecked<BasicJson>(text);
}

template <class BasicJson>
BasicJson parse_json_bounded_or_discarded(std::string_view text, int max_depth) {
  if (json_depth_violation(text, max_depth)) return BasicJson(BasicJson::value_t::discarded);
  try {
    return parse_unchecked<BasicJson>(text);
  } catch (const nlohmann::json::exception&) {
    return BasicJson(BasicJson::value_t::discarded);
  }
}

template nlohmann::json parse_json_bounded<nlohmann::json>(std::string_view, int);
template nlohmann::ordered_json parse_json_bounded<nlohmann::ordered_json>(std::string_view, int);
template nlohmann::json parse_json_bounded_or_discarded<nlohmann::json>(std::string_view, int);
template nlohmann::ordered_json parse_json_bounded_or_discarded<nlohmann::ordered_json>(std::string_view,
                                                                                        int);

}  // namespace spark
