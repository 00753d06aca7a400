// HttpServer::stop() works whenever it comes: before listen() starts (cpp-httplib 0.11's own stop() is a
// no-op then, which left listen() in accept() for good), racing with it, or while it serves; and once it
// returns, new connections are refused.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace spark {
namespace {

using namespace std::chrono_literals;

// A listen() that missed the stop never returns, so the bound only turns that hang into a failure; it is
// far above the milliseconds a stop takes, however loaded the machine.
constexpr auto kStopBound = 60s;

// Joins the listener once listen() has returned; if it has not within the bound, fails the test and ends
// the process at once (joining would hang, and destroying a joinable thread would abort without a report).
void expect_stopped_then_join(HttpServer& http, std::thread& listener, const std::string& what) {
  if (!http.wait_stopped(kStopBound)) {
    ADD_FAILURE() << "listen() did not return within " << kStopBound.count() << " s of stop(): " << what;
    std::fflush(nullptr);
    std::_Exit(1);
  }
  listener.join();
}

struct TestContext : ServerContext {
  TestContext() {
    options.host = "127.0.0.1";
    options.port = 0;
    options.engine.max_num_seqs = 2;
    options.engine.max_queued_requests = 2;
  }
};

// errno of a fresh TCP connect to the port (0: it connected).
int connect_errno(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

TEST(HttpServerStop, StopBeforeListenMakesListenReturnAtOnce) {
  TestContext ctx;
  HttpServer http(ctx);
  const int port = http.bind();
  http.stop();
  EXPECT_EQ(connect_errno(port), ECONNREFUSED);
  std::thread listener([&] { http.listen(); });
  expect_stopped_then_join(http, listener, "stop before listen");
}

TEST(HttpServerStop, StopRacingListenAlwaysEnds) {
  for (int i = 0; i < 50; ++i) {
    TestContext ctx;
    HttpServer http(ctx);
    http.bind();
    std::thread listener([&] { http.listen(); });
    if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(50 * i));
    http.stop();
    expect_stopped_then_join(http, listener, "iteration " + std::to_string(i));
  }
}

TEST(HttpServerStop, StopWhileServingRefusesNewConnections) {
  TestContext ctx;
  HttpServer http(ctx);
  const int port = http.bind();
  std::thread listener([&] { http.listen(); });
  // Serving: connections are accepted (the backlog takes them even before accept() runs).
  EXPECT_EQ(connect_errno(port), 0);
  http.stop();
  expect_stopped_then_join(http, listener, "stop while serving");
  EXPECT_EQ(connect_errno(port), ECONNREFUSED);
}

}  // namespace
}  // namespace spark
