// The front's request framing (it decides when a request is complete and may go to a worker) and its
// behaviour with connections that hold no request: they must never keep a complete request from a worker.
#include "server/http_front.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace spark {
namespace {

using State = RequestFrame::State;
constexpr size_t kHeaders = 1024;
constexpr size_t kBody = 100;

TEST(FrameRequest, HeadersOnlyRequestIsCompleteAtTheEmptyLine) {
  const std::string r = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(frame_request(r.substr(0, r.size() - 1), kHeaders, kBody).state, State::kIncomplete);
  const RequestFrame f = frame_request(r + "GET /next", kHeaders, kBody);
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.length, r.size());  // a pipelined request after it is not part of it
}

TEST(FrameRequest, ContentLengthBody) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\ncontent-length: 5\r\n\r\n";
  EXPECT_EQ(frame_request(head + "abcd", kHeaders, kBody).state, State::kIncomplete);
  const RequestFrame f = frame_request(head + "abcdeXYZ", kHeaders, kBody);
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.length, head.size() + 5);
}

TEST(FrameRequest, ChunkedBody) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "3\r\nabc\r\nA;ext=1\r\n0123456789\r\n0\r\n\r\n";
  for (size_t cut = 0; cut < body.size(); ++cut)
    EXPECT_EQ(frame_request(head + body.substr(0, cut), kHeaders, kBody).state, State::kIncomplete) << cut;
  const RequestFrame f = frame_request(head + body + "GET", kHeaders, kBody);
  ASSERT_EQ(f.state, State::kComplete);
  EXPECT_EQ(f.length, head.size() + body.size());
  EXPECT_EQ(frame_request(head + "zz\r\n", kHeaders, kBody).status, 400);
  EXPECT_EQ(frame_request(head + "3\r\nabcXY", kHeaders, kBody).status, 400);
  EXPECT_EQ(frame_request(head + "65\r\n", kHeaders, kBody).status, 413);  // 0x65 = 101 > 100
}

TEST(FrameRequest, RefusesWhatCannotBeFramedOrIsTooLarge) {
  EXPECT_EQ(frame_request(std::string(kHeaders + 1, 'a'), kHeaders, kBody).status, 431);
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nX: " + std::string(kHeaders, 'a') + "\r\n\r\n", kHeaders, kBody)
                .status,
            431);
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", kHeaders, kBody).status, 413);
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", kHeaders, kBody).status, 400);
  EXPECT_EQ(
      frame_request("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", kHeaders, kBody)
          .status,
      400);
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", kHeaders, kBody).status, 400);
  EXPECT_EQ(frame_request("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                          kHeaders, kBody)
                .status,
            400);
}

TEST(FrameRequest, ExpectContinueIsSeen) {
  const RequestFrame f =
      frame_request("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", kHeaders, kBody);
  EXPECT_EQ(f.state, State::kIncomplete);
  EXPECT_TRUE(f.expect_continue);
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until `fd` has a full line starting the answer, or `ms` pass; returns what arrived.
std::string read_some(int fd, int ms) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (out.find("\r\n\r\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 50};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// One worker, many silent and half-sent connections: a complete request is still served at once, and at
// the connection cap the longest-idle connection makes room rather than the newcomer being refused.
// No wall-clock threshold decides the result: the front's own timeouts are set far beyond what serving a
// request takes, so a worker held by a silent connection shows as no answer within them, whatever the load.
TEST(HttpFront, SilentConnectionsHoldNoWorker) {
  HttpFrontOptions o;
  o.workers = 1;
  o.max_connections = 40;
  o.request_read_timeout_s = 120;  // a half-sent request holds its connection, never the worker
  o.keep_alive_timeout_s = 120;    // the silent connections stay open until the cap closes them
  o.queue_timeout_s = 120;         // a complete request is never answered 503 for want of the worker
  HttpFront front(
      o,
      [](httplib::Stream& strm, bool, bool&) {
        char c;
        while (strm.read(&c, 1) > 0) {
        }
        const std::string r = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        return strm.write(r.data(), r.size()) == static_cast<ssize_t>(r.size());
      },
      nullptr);
  const int port = front.bind("127.0.0.1", 0);
  std::thread runner([&] { front.run(); });
  // Waits (up to 60 s, half the front's timeouts) for the answer to a GET sent on a new connection.
  auto get = [&](const char* what) {
    const int fd = connect_to(port);
    EXPECT_GE(fd, 0) << what;
    const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    EXPECT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size())) << what;
    const std::string answer = read_some(fd, 60000);
    EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200") << what << ": " << answer;
    return fd;
  };
  std::vector<int> held;
  for (int i = 0; i < 38; ++i) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    if (i % 2) {
      const std::string part = "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
      ASSERT_EQ(::send(fd, part.data(), part.size(), 0), static_cast<ssize_t>(part.size()));
    }
    held.push_back(fd);
  }
  // Served with 38 silent and half-sent connections open. The front accepts in arrival order, so once this
  // one is answered every connection before it has been accepted: the wait below makes them all idle for
  // over kEvictable (1 s) on the front's clock.
  held.push_back(get("with 38 connections held"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (int round = 0; round < 3; ++round) {  // at the cap from the second connection on
    held.push_back(get(round == 0 ? "the 40th connection" : "past the cap"));
  }
  front.stop();
  runner.join();
  for (int fd : held) ::close(fd);
}

}  // namespace
}  // namespace spark
