// OpenAI's Responses API: POST /v1/responses (whole or as typed server-sent events), GET and DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items. A request is converted to the chat request it
// amounts to (responses_request.h) and generated like chat completions; its output becomes reasoning,
// message and function_call items.
#pragma once

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace spark {

struct ServerContext;

void handle_responses_create(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses_get(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses_delete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses_input_items(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace spark
