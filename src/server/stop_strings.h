// Stop sequences over streamed text. Text that could be the start of a stop string is held back until
// the next chunk decides, so a stop string split across tokens (or chunks) is still caught and never
// leaks to the client.
#pragma once

#include <string>
#include <vector>

namespace spark {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Feeds text; returns what can be released now. After a stop string is found, stopped() is true,
  // the returned text ends just before it, and later calls return nothing.
  std::string feed(const std::string& text);
  // Releases the held-back tail at the end of generation.
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace spark
