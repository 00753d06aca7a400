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

// A failure the request's own input causes once it runs (a structured-output constraint whose next mask
// would cost more than the bound): the request ends as a 400 error, not a 500.
class RequestError : public Error {
 public:
  using Error::Error;
};

}  // namespace spark
