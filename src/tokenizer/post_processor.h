// The post-processor of a tokenizer.json ("post_processor" value) for one sequence: the special-token
// ids it puts before and after the encoded text when special tokens are asked for (encode with
// add_special_tokens). ByteLevel adds none; TemplateProcessing's "single" template, RobertaProcessing
// and BertProcessing (cls + text + sep) and a Sequence of them do.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace spark {

struct PostProcessor {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;

  // Throws spark::Error for a post-processor that is not supported or malformed.
  static PostProcessor from_json(const nlohmann::json& config);

  bool empty() const { return prefix.empty() && suffix.empty(); }
};

}  // namespace spark
