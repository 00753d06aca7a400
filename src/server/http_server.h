// The OpenAI-compatible HTTP front end on cpp-httplib: routes, authentication, body limits, and the
// guarantee that no request can crash the process (every handler's failure becomes an OpenAI error).
#pragma once

#include <functional>
#include <memory>

#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace spark {

class HttpServer {
 public:
  explicit HttpServer(ServerContext& ctx);
  ~HttpServer();

  // Binds host:port (port 0: any free port) and returns the bound port; throws spark::Error on failure.
  int bind();
  // Serves until stop() is called.
  void listen();
  void stop();

 private:
  ServerContext& ctx_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace spark
