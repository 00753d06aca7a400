// The OpenAI-compatible HTTP front end on cpp-httplib: routes, authentication, body limits, and the
// guarantee that no request can crash the process (every handler's failure becomes an OpenAI error).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "server/server_context.h"

namespace spark {

class HttpFront;
class HttpRouter;

class HttpServer {
 public:
  explicit HttpServer(ServerContext& ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: any free port) and returns the bound port; throws spark::Error on failure.
  int bind();
  // Names this replica in an X-Served-By header on every response; call before listen().
  void set_served_by(const std::string& name);
  // Serves until stop(); returns at once when stop() came first. Requests in progress when stop() is called
  // run to completion before this returns; idle keep-alive connections are closed at once.
  void listen();
  // Stops accepting connections at once, from any thread, before or during listen(): the listening socket is
  // shut down, so new connections are refused (a load balancer moves on) and a listen() that has not yet
  // reached accept() returns as soon as it does. Requests in progress carry on.
  void stop();
  // Waits up to `timeout` for listen() to return; true when it has.
  bool wait_stopped(std::chrono::milliseconds timeout);

 private:
  ServerContext& ctx_;
  // Routes and handlers (cpp-httplib); the front (our epoll loop) owns the connections and feeds it
  // complete requests.
  std::unique_ptr<HttpRouter> server_;
  std::unique_ptr<HttpFront> front_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool listen_returned_ = false;
};

}  // namespace spark
