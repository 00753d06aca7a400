#include "server/http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "spark/error.h"

namespace spark {

using Clock = std::chrono::steady_clock;

struct HttpFront::Conn {
  int fd = -1;
  std::string buf;  // bytes received and not yet served (a request, maybe the start of the next)
  RequestFrame frame;
  bool continue_sent = false;
  bool lingering = false;
  Clock::time_point first_byte;  // of the request being read
  Clock::time_point idle_since;  // accepted, or last response written
  Clock::time_point queued_at;
  Clock::time_point linger_until;
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;
};

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A connection refused or answered by the front reads (and drops) its client's remaining bytes this long,
// so the client reads the answer instead of a reset.
constexpr auto kLinger = std::chrono::seconds(1);
// At the connection cap, a connection idle this long may be closed, or a sender reading its request this
// long cut (408), to make room for a new one. Younger ones are left alone: closing a keep-alive
// connection just answered races with the client's next request on it, which would then get no answer.
constexpr auto kEvictable = std::chrono::seconds(1);
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, s)));
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

RequestFrame error_frame(int status, std::string message) {
  RequestFrame f;
  f.state = RequestFrame::State::kError;
  f.status = status;
  f.message = std::move(message);
  return f;
}

// Where a chunked body starting at `pos` ends (one past its last byte), 0 while incomplete, or an error.
RequestFrame chunked_end(std::string_view buf, size_t pos, size_t max_body_bytes, RequestFrame f) {
  size_t body = 0;
  for (;;) {
    const size_t eol = buf.find("\r\n", pos);
    if (eol == std::string_view::npos) {
      if (buf.size() - pos > 1024) return error_frame(400, "malformed chunked request body");
      return f;
    }
    std::string_view line = buf.substr(pos, eol - pos);
    line = line.substr(0, line.find(';'));  // chunk extensions
    line = trim(line);
    if (line.empty() || line.size() > 15) return error_frame(400, "malformed chunked request body");
    size_t n = 0;
    for (char ch : line) {
      const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                    : (ch >= 'a' && ch <= 'f')                   ? ch - 'a' + 10
                    : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                                                                 : -1;
      if (d < 0) return error_frame(400, "malformed chunked request body");
      n = n * 16 + static_cast<size_t>(d);
    }
    pos = eol + 2;
    if (n == 0) {
      // Trailer lines, then the empty line.
      for (;;) {
        const size_t end = buf.find("\r\n", pos);
        if (end == std::string_view::npos) {
          if (buf.size() - pos > 8192) return error_frame(431, "request trailers too large");
          return f;
        }
        const bool last = end == pos;
        pos = end + 2;
        if (last) {
          f.state = RequestFrame::State::kComplete;
          f.length = pos;
          return f;
        }
      }
    }
    body += n;
    if (body > max_body_bytes) return error_frame(413, "the request body is too large");
    if (buf.size() < pos + n + 2) return f;
    if (buf.substr(pos + n, 2) != "\r\n") return error_frame(400, "malformed chunked request body");
    pos += n + 2;
  }
}

std::string error_response(int status, const std::string& message) {
  const char* reason = status == 503   ? "Service Unavailable"
                       : status == 408 ? "Request Timeout"
                       : status == 413 ? "Payload Too Large"
                       : status == 431 ? "Request Header Fields Too Large"
                                       : "Bad Request";
  const char* type = status == 503 ? "server_error" : "invalid_request_error";
  std::string escaped;
  for (char ch : message) {
    if (ch == '"' || ch == '\\') escaped += '\\';
    escaped += ch;
  }
  const std::string body = "{\"error\":{\"message\":\"" + escaped + "\",\"type\":\"" + type +
                           "\",\"param\":null,\"code\":" + std::to_string(status) + "}}";
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  r += "Content-Type: application/json\r\nConnection: close\r\n";
  if (status == 503) r += "Retry-After: 1\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return r;
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  ip = host;
}

// One request, already read, served to httplib: reads come from the buffer (then end), writes go to the
// socket with a deadline. The front already answered "100 Continue" where the client waited for it.
class BufferedStream final : public httplib::Stream {
 public:
  BufferedStream(const HttpFront::Conn& c, std::string_view request, double write_timeout_s)
      : c_(c), in_(request), write_timeout_ms_(static_cast<int>(write_timeout_s * 1000)) {}

  bool is_readable() const override { return pos_ < in_.size(); }
  // Also false once the client has gone: the generation handler polls this to cancel abandoned requests.
  bool is_writable() const override {
    pollfd p{c_.fd, POLLOUT, 0};
    return ::poll(&p, 1, write_timeout_ms_) > 0 && peer_open();
  }
  // The client has not closed or reset the connection: an orderly close reads as end of file; bytes of a
  // pipelined next request mean it is still there.
  bool peer_open() const {
    pollfd p{c_.fd, 0, 0};
    if (::poll(&p, 1, 0) < 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
    char b;
    const ssize_t n = ::recv(c_.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (std::string_view(ptr, size) == kContinue) return static_cast<ssize_t>(size);
    size_t done = 0;
    const auto deadline = Clock::now() + std::chrono::milliseconds(write_timeout_ms_);
    while (done < size) {
      const ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd p{c_.fd, POLLOUT, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return -1;
        continue;
      }
      return -1;
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.remote_ip;
    port = c_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.local_ip;
    port = c_.local_port;
  }
  socket_t socket() const override { return c_.fd; }
  size_t consumed() const { return pos_; }

 private:
  const HttpFront::Conn& c_;
  std::string_view in_;
  size_t pos_ = 0;
  int write_timeout_ms_;
};

// The request this worker thread is running, for client_still_connected().
thread_local const BufferedStream* t_serving = nullptr;

}  // namespace

bool client_still_connected() {
  return t_serving == nullptr || t_serving->peer_open();
}

RequestFrame frame_request(std::string_view buf, size_t max_header_bytes, size_t max_body_bytes) {
  RequestFrame f;
  // httplib ends the headers at the first empty line (CRLF); a bare-LF line before it is skipped.
  const size_t end = buf.find("\n\r\n");
  if (end == std::string_view::npos || end + 3 > max_header_bytes) {
    if (buf.size() > max_header_bytes || (end != std::string_view::npos))
      return error_frame(431, "the request line and headers are too large (at most " +
                                  std::to_string(max_header_bytes) + " bytes)");
    return f;
  }
  f.header_end = end + 3;
  bool chunked = false;
  bool has_length = false;
  size_t length = 0;
  size_t pos = buf.find('\n') + 1;  // past the request line
  while (pos < f.header_end - 2) {
    const size_t eol = buf.find('\n', pos);
    const std::string_view line = buf.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      if (value.empty() || value.size() > 18 || !std::all_of(value.begin(), value.end(), [](char ch) {
            return std::isdigit(static_cast<unsigned char>(ch));
          }))
        return error_frame(400, "invalid Content-Length");
      const size_t v = std::stoull(std::string(value));
      if (has_length && v != length) return error_frame(400, "conflicting Content-Length headers");
      has_length = true;
      length = v;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (!iequals(value, "chunked")) return error_frame(400, "unsupported Transfer-Encoding");
      chunked = true;
    } else if (iequals(name, "Expect")) {
      f.expect_continue = iequals(value, "100-continue");
    }
  }
  if (chunked) {
    if (has_length) return error_frame(400, "both Content-Length and Transfer-Encoding");
    return chunked_end(buf, f.header_end, max_body_bytes, f);
  }
  if (length > max_body_bytes) return error_frame(413, "the request body is too large");
  if (buf.size() >= f.header_end + length) {
    f.state = RequestFrame::State::kComplete;
    f.length = f.header_end + length;
  }
  return f;
}

HttpFront::HttpFront(HttpFrontOptions options, Serve serve, OnStatus on_status)
    : options_(options), serve_(std::move(serve)), on_status_(std::move(on_status)) {
  // Every connection is a descriptor: raise the soft limit to the hard one, and keep the cap under it.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  const rlim_t room = rl.rlim_cur > 256 ? rl.rlim_cur / 2 : 64;
  if (rl.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(options_.max_connections) > room) {
    spdlog::warn("--max-connections {} lowered to {} (open-file limit {})", options_.max_connections, room,
                 rl.rlim_cur);
    options_.max_connections = static_cast<int>(room);
  }
  options_.max_connections = std::max(1, options_.max_connections);
  options_.workers = std::max<size_t>(1, options_.workers);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    throw Error(std::string("cannot create the HTTP event loop: ") + strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

HttpFront::~HttpFront() {
  for (auto& [p, c] : conns_) ::close(c->fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

int HttpFront::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    throw Error("cannot listen on " + where + ": " + gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) throw Error("cannot listen on " + where + ": " + why);
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  std::string ip;
  int bound = port;
  address_of(a, ip, bound);
  return bound;
}

void HttpFront::stop() {
  // Shut the socket down before raising the flag: once run() sees the flag it may close the descriptor.
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  stop_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

int HttpFront::open_connections() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(conns_.size() - lingering_ + ready_.size() + busy_ + returned_.size());
}

void HttpFront::run() {
  if (stop_.load()) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  // Starting a few hundred threads takes a while on a busy machine (0.5 s on 2 loaded cores): a start-up
  // error that stops the front meanwhile must not wait for the rest.
  for (size_t i = 0; i < options_.workers && !stop_.load(); ++i) workers_.emplace_back([this] { worker(); });
  loop();
  wind_down();
}

void HttpFront::loop() {
  std::vector<epoll_event> events(256);
  auto next_tick = Clock::now();
  bool listening = true;
  for (;;) {
    if (stop_.load()) {
      // Stopped: accept nothing more (stop() shut the socket down), but keep serving the connections already
      // open while requests run (a drain answers them 503 and closes), then return.
      if (listening) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listening = false;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (busy_ == 0 && ready_.empty() && returned_.empty()) break;
    }
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 50);
    for (int i = 0; i < n; ++i) {
      void* p = events[static_cast<size_t>(i)].data.ptr;
      if (p == nullptr) {
        if (!stop_.load()) on_accept();
      } else if (p == &wake_fd_) {
        uint64_t v;
        while (::read(wake_fd_, &v, sizeof(v)) > 0) {
        }
        adopt_returned();
      } else {
        auto* c = static_cast<Conn*>(p);
        if (conns_.count(c)) on_readable(c);
      }
    }
    if (Clock::now() >= next_tick) {
      tick();
      next_tick = Clock::now() + std::chrono::milliseconds(50);
    }
  }
}

std::unique_ptr<HttpFront::Conn> HttpFront::take(Conn* c) {
  auto it = conns_.find(c);
  std::unique_ptr<Conn> owned = std::move(it->second);
  conns_.erase(it);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, owned->fd, nullptr);
  buffered_bytes_ -= owned->buf.size();
  if (owned->lingering) --lingering_;
  return owned;
}

void HttpFront::close_now(std::unique_ptr<Conn> c) {
  ::close(c->fd);
}

void HttpFront::answer_and_close(std::unique_ptr<Conn> c, int status, const std::string& message) {
  if (on_status_) on_status_(status);
  const std::string r = error_response(status, message);
  [[maybe_unused]] const ssize_t n = ::send(c->fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(c->fd, SHUT_WR);
  // Linger: read and drop what the client still sends until it closes (or kLinger passes).
  c->buf.clear();
  c->buf.shrink_to_fit();
  c->lingering = true;
  c->linger_until = Clock::now() + kLinger;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = c.get();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
    ::close(c->fd);
    return;
  }
  ++lingering_;
  Conn* p = c.get();
  conns_.emplace(p, std::move(c));
}

// At the connection cap: close the longest-idle keep-alive connection, else cut the slowest sender (both
// only past kEvictable); false when neither is there.
bool HttpFront::make_room() {
  Conn* idle = nullptr;
  Conn* slow = nullptr;
  for (auto& [p, c] : conns_) {
    if (c->lingering) continue;
    if (c->buf.empty()) {
      if (!idle || c->idle_since < idle->idle_since) idle = p;
    } else if (!slow || c->first_byte < slow->first_byte) {
      slow = p;
    }
  }
  const auto now = Clock::now();
  if (idle && now - idle->idle_since >= kEvictable) {
    close_now(take(idle));
    return true;
  }
  if (slow && now - slow->first_byte >= kEvictable) {
    answer_and_close(take(slow), 408,
                     "the request was not received in time (the server is at its connection limit)");
    return true;
  }
  return false;
}

void HttpFront::on_accept() {
  for (;;) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment rather than spin on the ready listener.
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listener_paused_ = true;
        listener_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        spdlog::warn("accept: {} (pausing new connections for 100 ms)", strerror(errno));
      }
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->idle_since = Clock::now();
    address_of(a, c->remote_ip, c->remote_port);
    sockaddr_storage l{};
    socklen_t llen = sizeof(l);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&l), &llen) == 0)
      address_of(l, c->local_ip, c->local_port);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (open_connections() >= options_.max_connections && !make_room()) {
      answer_and_close(
          std::move(c), 503,
          "the server is at its connection limit (" + std::to_string(options_.max_connections) + ")");
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    Conn* p = c.get();
    conns_.emplace(p, std::move(c));
  }
}

void HttpFront::on_readable(Conn* c) {
  char chunk[kReadChunk];
  if (c->lingering) {
    for (;;) {
      const ssize_t n = ::recv(c->fd, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close_now(take(c));
      return;
    }
  }
  if (buffered_bytes_ + kReadChunk > options_.max_buffered_bytes) {
    answer_and_close(take(c), 503, "the server is holding too many request bytes; retry");
    return;
  }
  const ssize_t n = ::recv(c->fd, chunk, sizeof(chunk), MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    close_now(take(c));
    return;
  }
  if (n < 0) return;
  if (c->buf.empty()) c->first_byte = Clock::now();
  c->buf.append(chunk, static_cast<size_t>(n));
  buffered_bytes_ += static_cast<size_t>(n);
  try_dispatch(c);
}

void HttpFront::try_dispatch(Conn* c) {
  if (c->buf.empty()) return;
  c->frame = frame_request(c->buf, options_.max_header_bytes, options_.max_body_bytes);
  if (c->frame.state == RequestFrame::State::kError) {
    const int status = c->frame.status;
    const std::string message = c->frame.message;
    answer_and_close(take(c), status, message);
    return;
  }
  if (c->frame.state == RequestFrame::State::kIncomplete) {
    if (c->frame.header_end > 0 && c->frame.expect_continue && !c->continue_sent) {
      c->continue_sent = true;
      [[maybe_unused]] const ssize_t n =
          ::send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    return;
  }
  std::unique_ptr<Conn> owned = take(c);
  owned->queued_at = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Complete requests beyond what the workers can take soon are refused here, at once.
    if (ready_.size() < options_.workers) {
      ready_.push_back(std::move(owned));
    }
  }
  if (owned) {
    answer_and_close(std::move(owned), 503, "the server is busy; retry");
    return;
  }
  cv_.notify_one();
}

void HttpFront::adopt_returned() {
  std::vector<std::unique_ptr<Conn>> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returned_);
  }
  for (auto& c : back) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
      ::close(c->fd);
      continue;
    }
    buffered_bytes_ += c->buf.size();
    Conn* p = c.get();
    conns_.emplace(p, std::move(c));
    try_dispatch(p);  // a pipelined request may already be complete
  }
}

void HttpFront::tick() {
  const auto now = Clock::now();
  if (listener_paused_ && now >= listener_paused_until_ && !stop_.load()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    listener_paused_ = false;
  }
  std::vector<Conn*> idle_out, slow_out, linger_out;
  for (auto& [p, c] : conns_) {
    if (c->lingering) {
      if (now >= c->linger_until) linger_out.push_back(p);
    } else if (c->buf.empty()) {
      if (now - c->idle_since >= seconds(options_.keep_alive_timeout_s)) idle_out.push_back(p);
    } else if (now - c->first_byte >= seconds(options_.request_read_timeout_s)) {
      slow_out.push_back(p);
    }
  }
  for (Conn* p : idle_out) close_now(take(p));
  for (Conn* p : linger_out) close_now(take(p));
  for (Conn* p : slow_out) answer_and_close(take(p), 408, "the request was not received in time");
  // Complete requests that waited too long for a worker.
  std::vector<std::unique_ptr<Conn>> late;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!ready_.empty() && now - ready_.front()->queued_at >= seconds(options_.queue_timeout_s)) {
      late.push_back(std::move(ready_.front()));
      ready_.pop_front();
    }
  }
  for (auto& c : late) answer_and_close(std::move(c), 503, "the server is busy; retry");
}

void HttpFront::worker() {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return workers_stop_ || !ready_.empty(); });
      if (ready_.empty()) return;
      c = std::move(ready_.front());
      ready_.pop_front();
      ++busy_;
    }
    const size_t len = c->frame.length;
    bool keep = false;
    {
      BufferedStream strm(*c, std::string_view(c->buf).substr(0, len), options_.write_timeout_s);
      bool connection_closed = false;
      bool ok = false;
      t_serving = &strm;
      try {
        ok = serve_(strm, stop_.load(), connection_closed);
      } catch (const std::exception& e) {
        spdlog::error("HTTP request failed: {}", e.what());
      }
      t_serving = nullptr;
      // The frame is ours, so bytes of it httplib left unread are dropped with it: a response written
      // before the body was read (the API-key and header checks answer before routing) keeps the
      // connection. Closing it after that keep-alive response raced the client's next request on it.
      keep = ok && !connection_closed && !stop_.load() && strm.consumed() <= len;
    }
    c->buf.erase(0, len);
    c->continue_sent = false;
    c->idle_since = Clock::now();
    c->first_byte = c->idle_since;  // of a pipelined request already in the buffer
    std::unique_lock<std::mutex> lock(mu_);
    --busy_;
    if (keep) {
      returned_.push_back(std::move(c));
      lock.unlock();
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    } else {
      lock.unlock();
      ::shutdown(c->fd, SHUT_RDWR);
      ::close(c->fd);
    }
  }
}

void HttpFront::wind_down() {
  if (listen_fd_ >= 0) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  // What is left carries no work (idle or half-read connections): close it.
  for (auto& [p, c] : conns_) ::close(c->fd);
  conns_.clear();
  lingering_ = 0;
  buffered_bytes_ = 0;
  std::deque<std::unique_ptr<Conn>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting.swap(ready_);
    workers_stop_ = true;
  }
  cv_.notify_all();
  for (auto& c : waiting) {
    if (on_status_) on_status_(503);
    const std::string r = error_response(503, "the server is shutting down");
    [[maybe_unused]] const ssize_t n = ::send(c->fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(c->fd);
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
  for (auto& c : returned_) ::close(c->fd);
  returned_.clear();
}

}  // namespace spark
