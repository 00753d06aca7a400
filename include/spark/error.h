// Errors that cross module boundaries. Every failure a user can cause (a broken checkpoint, a bad flag,
// a bad request) is reported as a spark::Error with a one-line message; nothing aborts the process.
#pragma once

#include <stdexcept>
#include <string>

namespace spark {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace spark
