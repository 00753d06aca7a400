// The one error type the chat template engine throws. A request whose messages make the template fail (a
// raise_exception in the template, an unsupported role, a type error) becomes an HTTP 400 with this message;
// detail() is the bare reason for clients, what() adds the template line.
#pragma once

#include <string>

#include "spark/error.h"

namespace spark {

class TemplateError : public Error {
 public:
  enum class Kind {
    kSyntax,   // the template text does not parse
    kRaised,   // the template called raise_exception(message)
    kRuntime,  // undefined value, type error, unsupported operation while rendering
    kLimit,    // output size, recursion depth or step budget exceeded
  };

  TemplateError(Kind kind, const std::string& detail, int line);

  Kind kind() const { return kind_; }
  const std::string& detail() const { return detail_; }
  int line() const { return line_; }

 private:
  Kind kind_;
  std::string detail_;
  int line_;
};

}  // namespace spark
