// Who may call which route when the server has an API key (--api-key / SPARK_API_KEY).
#pragma once

#include <string_view>

namespace spark {

// True when `authorization` (the request's Authorization header) is exactly "Bearer <key>". The comparison
// takes the same time whatever the header holds (it depends only on the key's length), so response timing
// does not reveal how many leading characters of a guess were right.
bool api_key_matches(std::string_view authorization, std::string_view key);

// Routes that need the key: every route but /health (open for load balancers), and /metrics unless
// metrics_public. vLLM guards only /v1; we also guard /tokenize and /detokenize (they run the tokenizer and
// chat template, i.e. spend CPU on behalf of the caller) and /metrics (request counts, token rates and the
// model name are information an unauthenticated caller need not have). A Prometheus scraper that cannot
// send a bearer token is let in with --metrics-public.
bool route_needs_api_key(std::string_view path, bool metrics_public);

}  // namespace spark
