// The connection front of the HTTP server: one epoll thread accepts connections and reads each request
// (headers and body, bounded in size and time) without holding a worker; only complete requests go to the
// worker pool, which runs them through cpp-httplib's request processing. Idle keep-alive connections and
// slow senders therefore cost a descriptor and a small buffer, never a worker, and a request beyond what
// the workers can take is answered 503 by the front itself. docs/http-front.md says why and gives the limits.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace spark {

struct HttpFrontOptions {
  int max_connections = 4096;           // open connections; beyond: idle ones are closed, else 503
  size_t workers = 64;                  // threads running complete requests
  size_t max_header_bytes = 72 * 1024;  // request line + headers
  size_t max_body_bytes = 8 * 1024 * 1024;
  size_t max_buffered_bytes = 256 * 1024 * 1024;  // all connections' unserved request bytes together
  double request_read_timeout_s = 10;             // from a request's first byte to its last
  double keep_alive_timeout_s = 5;                // idle time before a keep-alive connection is closed
  double queue_timeout_s = 1;  // longest wait of a complete request for a worker before 503
  double write_timeout_s = 5;  // longest wait for a client to take response bytes
};

// How much of a buffer forms one request, by HTTP/1.1 framing (Content-Length or chunked; neither: no
// body), the same framing cpp-httplib reads it by.
struct RequestFrame {
  enum class State { kIncomplete, kComplete, kError } state = State::kIncomplete;
  size_t header_end = 0;         // bytes of request line and headers, when known (0: not yet)
  size_t length = 0;             // kComplete: bytes of the whole request
  bool expect_continue = false;  // the client waits for "100 Continue" before its body
  int status = 0;                // kError: the status to answer
  std::string message;           // kError: why
};
RequestFrame frame_request(std::string_view buf, size_t max_header_bytes, size_t max_body_bytes);

// From a request handler: whether the client of the request this thread is serving is still connected.
// A handler that answers only at the end (a non-streamed generation) polls it to stop work nobody will
// read. True on a thread that is not serving a request through an HttpFront.
bool client_still_connected();

class HttpFront {
 public:
  // Runs one complete request read from `strm`; as httplib::Server's request processing: false when the
  // connection must close, `connection_closed` set when the request asked for that.
  using Serve = std::function<bool(httplib::Stream& strm, bool close_connection, bool& connection_closed)>;
  // Called for each answer the front gives itself (status), for the metrics.
  using OnStatus = std::function<void(int status)>;

  HttpFront(HttpFrontOptions options, Serve serve, OnStatus on_status);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds host:port (0: any free port), returns the port; throws spark::Error with the reason on failure.
  int bind(const std::string& host, int port);
  // Serves until stop(); then closes connections not running a request, waits for the requests running to
  // finish, and returns. Returns at once when stop() came first.
  void run();
  // From any thread, before or during run(): the listening socket is shut down at once (new connections
  // are refused, so a load balancer moves on) and run() winds down.
  void stop();
  int effective_max_connections() const { return options_.max_connections; }

  struct Conn;

 private:
  void loop();
  void worker();
  void on_accept();
  void on_readable(Conn* c);
  void try_dispatch(Conn* c);
  void answer_and_close(std::unique_ptr<Conn> c, int status, const std::string& message);
  void close_now(std::unique_ptr<Conn> c);
  std::unique_ptr<Conn> take(Conn* c);
  bool make_room();
  void tick();
  void adopt_returned();
  void wind_down();
  int open_connections();

  HttpFrontOptions options_;
  Serve serve_;
  OnStatus on_status_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  bool listener_paused_ = false;
  std::chrono::steady_clock::time_point listener_paused_until_;
  std::atomic<bool> stop_{false};
  size_t buffered_bytes_ = 0;  // epoll thread: bytes held by connections it owns
  // Connections the epoll thread owns: reading a request, idle between requests, or lingering after an
  // answer the front gave (draining input so the client reads the answer rather than a reset).
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  size_t lingering_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Conn>> ready_;      // complete requests waiting for a worker
  std::vector<std::unique_ptr<Conn>> returned_;  // keep-alive connections back from the workers
  size_t busy_ = 0;                              // workers running a request
  bool workers_stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace spark
