// POST /v1/chat/completions and POST /v1/completions: request -> engine -> response, streamed as
// server-sent events or returned whole. A client that disconnects cancels its requests at the next
// engine step, streaming or not.
#pragma once

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace spark {

struct ServerContext;

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace spark
