// An error answered to an HTTP client in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}} with the matching status.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace spark {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}

  static ApiError bad_request(const std::string& message, const std::string& param = {}) {
    return ApiError(400, "invalid_request_error", message, param);
  }

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

  nlohmann::json body() const {
    return {{"error",
             {{"message", what()},
              {"type", type_},
              {"param", param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_)},
              {"code", status_}}}};
  }

 private:
  int status_;
  std::string type_;
  std::string param_;
};

}  // namespace spark
