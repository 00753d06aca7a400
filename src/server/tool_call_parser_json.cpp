#include "server/tool_call_parser_json.h"

#include <vector>

#include "util/bounded_json.h"

namespace spark {

bool JsonScanner::feed(char c) {
  if (in_string_) {
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (collecting_) {
        collecting_ = false;
        first_ = FirstKey::kKey;
      }
      return false;
    }
    if (collecting_) key_ += c;
    return false;
  }
  const bool first_member = first_ == FirstKey::kPending && open_.size() == 1;
  switch (c) {
    case '"':
      in_string_ = true;
      if (first_member && open_[0] == '{') collecting_ = true;
      return false;
    case '{':
    case '[':
      if (first_member) first_ = FirstKey::kNone;
      open_ += c;
      return false;
    case '}':
    case ']':
      if (first_member) first_ = FirstKey::kNone;
      if (!open_.empty()) open_.pop_back();
      return open_.empty();
    case ' ':
    case '\t':
    case '\n':
    case '\r':
      return false;
    default:
      if (first_member) first_ = FirstKey::kNone;
      return false;
  }
}

namespace {

std::optional<RepairedJson> repair_at(std::string_view text, size_t cut) {
  JsonScanner scanner;
  for (size_t i = 0; i < cut; ++i) scanner.feed(text[i]);
  std::string fixed(text.substr(0, cut));
  std::string appended;
  if (scanner.in_string()) {
    if (scanner.escaped()) fixed.pop_back();
    appended += '"';
  } else {
    while (!fixed.empty() && (fixed.back() == ' ' || fixed.back() == '\n' || fixed.back() == '\t' ||
                              fixed.back() == '\r' || fixed.back() == ',')) {
      fixed.pop_back();
    }
    if (!fixed.empty() && fixed.back() == ':') appended += "null";
  }
  const std::string& open = scanner.open();
  for (auto it = open.rbegin(); it != open.rend(); ++it) appended += (*it == '{') ? '}' : ']';
  nlohmann::ordered_json value = parse_json_bounded_or_discarded<nlohmann::ordered_json>(fixed + appended);
  if (value.is_discarded()) return std::nullopt;
  return RepairedJson{std::move(value), cut, std::move(appended)};
}

}  // namespace

std::optional<RepairedJson> repair_truncated_json(std::string_view text) {
  constexpr size_t kMaxCuts = 16;  // bounds the work on long garbage; the latest cuts are the likely ones
  std::vector<size_t> cuts{text.size()};
  JsonScanner scanner;
  std::vector<size_t> closes;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool was_in_string = scanner.in_string();
    scanner.feed(text[i]);
    if (!was_in_string && (text[i] == '}' || text[i] == ']')) closes.push_back(i + 1);
  }
  for (auto it = closes.rbegin(); it != closes.rend() && cuts.size() < kMaxCuts; ++it) {
    if (*it != text.size()) cuts.push_back(*it);
  }
  for (size_t cut : cuts) {
    if (auto repaired = repair_at(text, cut)) return repaired;
  }
  return std::nullopt;
}

}  // namespace spark
