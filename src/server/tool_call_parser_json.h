// Finding and repairing JSON objects that the model writes in place of the Spark tool-call syntax.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace spark {

// Follows a JSON text one byte at a time (starting at its opening bracket) far enough to tell where the
// outermost bracket closes, and what the first key of an object is, without parsing it.
class JsonScanner {
 public:
  enum class FirstKey {
    kPending,  // nothing significant after the opening `{` yet
    kNone,     // the first member is not a string key (or the object is empty, or it is an array)
    kKey,      // first_key() holds the first key's raw text (escapes not decoded)
  };

  // Returns true when `c` closes the outermost bracket.
  bool feed(char c);

  bool in_string() const { return in_string_; }
  bool escaped() const { return escaped_; }
  // The brackets still open, outermost first.
  const std::string& open() const { return open_; }
  FirstKey first_key_state() const { return first_; }
  const std::string& first_key() const { return key_; }

 private:
  std::string open_;
  bool in_string_ = false;
  bool escaped_ = false;
  bool collecting_ = false;
  FirstKey first_ = FirstKey::kPending;
  std::string key_;
};

struct RepairedJson {
  nlohmann::ordered_json value;
  size_t used = 0;       // bytes of the input that the value covers; the rest is not part of it
  std::string appended;  // what was added to close it, for the recovery report
};

// Repairs a JSON text that stopped before its brackets closed (end of output, or a tag the JSON cannot
// contain): closes an open string, drops a dangling comma, completes a dangling `"key":` with null and closes
// the open brackets. When the whole text cannot be repaired, tries it cut after each of its last closing
// brackets. Returns nullopt when nothing parses.
std::optional<RepairedJson> repair_truncated_json(std::string_view text);

}  // namespace spark
