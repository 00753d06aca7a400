// Spark's own chat template, written by us for the checkpoints spark-server generates (the checkpoint
// generator saves it as chat_template.jinja). It renders the format in the spec's "Chat format" section:
// S0<|System|>\nyou are a helpful assistant.[tools][\n\n{system}]E0, S0<|User|>...E0, S0<|Bot|>...E0,
// grouped S0<|Tool|><tool_response>...E0, and the S0<|Bot|><think> / S0<|Bot|></think> generation prompt.
#pragma once

#include <string>

namespace spark {

std::string spark_default_chat_template();

}  // namespace spark
