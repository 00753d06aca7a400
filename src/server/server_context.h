// Everything a request handler needs, built once at start-up.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "grammar/matcher.h"
#include "server/metrics.h"
#include "server/prompt_builder.h"
#include "spark/engine.h"
#include "tokenizer/tokenizer.h"

namespace spark {

class SparkModel;
class ConstraintVocab;

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  int64_t max_model_len = 0;
  std::string chat_template;
  int64_t max_body_bytes = 8 * 1024 * 1024;
  int default_max_tokens = 0;  // 0: up to the context limit, as vLLM does
  std::string quant = "none";  // none (as stored), auto, or a format name
  std::string priority = "speed";
  EngineOptions engine;
};

struct ServerContext {
  ServerOptions options;
  std::string served_model_name;
  std::string kernel_isa;
  int64_t created = 0;  // unix time the model was loaded
  std::shared_ptr<SparkModel> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<PromptBuilder> prompts;
  std::shared_ptr<const ConstraintVocab> constraint_vocab;  // token texts, for constrained decoding
  std::shared_ptr<const grammar::TokenVocab> grammar_vocab;  // the same for structured outputs (no specials)
  ServerMetrics metrics;
  std::atomic<bool> ready{false};
};

}  // namespace spark
