// safetensors files as spark-server opens them (SafetensorsFile maps the file and validates it fully, so
// later code trusts every offset). The first input byte picks how the rest becomes a file:
//   even: the rest is the whole file, length prefix included;
//   odd:  the rest is [2-byte data size][header JSON]; the file is the correct length prefix, the header and
//         that many data bytes, so the fuzzer spends its time on the header rather than the prefix.
// A bad file must be a spark::Error. A file that opens must keep the promise: every tensor's bytes lie in the
// data section, match its shape and dtype exactly, and overlap no other tensor.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "model/safetensors.h"
#include "spark/error.h"

namespace {

using spark::fuzz::check;

int memory_file() {
  static const int fd = ::memfd_create("safetensors_fuzz", MFD_CLOEXEC);
  check(fd >= 0, "memfd_create failed");
  return fd;
}

void replace_contents(int fd, const std::string& bytes) {
  check(::ftruncate(fd, 0) == 0, "ftruncate failed");
  check(::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()), "pwrite failed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string file;
  if (data[0] % 2 == 0) {
    file.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    if (size < 3) return 0;
    const size_t data_bytes = data[1] | (size_t{data[2]} << 8);
    const std::string header(reinterpret_cast<const char*>(data + 3), size - 3);
    const uint64_t len = header.size();
    file.assign(reinterpret_cast<const char*>(&len), 8);
    file += header;
    file.append(data_bytes, '\x5a');
  }
  const int fd = memory_file();
  replace_contents(fd, file);
  const uint64_t header_len = file.size() >= 8 ? [&] {
    uint64_t v = 0;
    std::memcpy(&v, file.data(), 8);
    return v;
  }() : 0;

  try {
    spark::SafetensorsFile st("/proc/self/fd/" + std::to_string(fd));
    const uint64_t data_size = file.size() - 8 - header_len;
    std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
    for (const auto& [name, t] : st.tensors()) {
      const int elem = spark::safetensors_dtype_size(t.dtype);
      check(elem > 0, "tensor with an unknown dtype", name);
      unsigned __int128 want = static_cast<unsigned>(elem);
      bool empty = false;  // a zero dimension makes the tensor empty whatever the others are
      for (int64_t d : t.shape) {
        check(d >= 0, "negative dimension", name);
        empty = empty || d == 0;
      }
      for (int64_t d : t.shape) {
        if (empty) {
          want = 0;
          break;
        }
        want *= static_cast<uint64_t>(d);
        if (want > data_size) break;  // also stops the product from overflowing 128 bits
      }
      check(want == t.nbytes, "byte count does not match shape and dtype", name);
      check(t.nbytes <= data_size, "tensor larger than the data section", name);
      check(static_cast<unsigned __int128>(t.numel()) * static_cast<unsigned>(elem) == t.nbytes,
            "numel() disagrees with the bytes", name);
      if (t.nbytes > 0) {
        // Touch both ends: a pointer outside the mapping faults here.
        volatile uint8_t first = t.data[0], last = t.data[t.nbytes - 1];
        (void)first;
        (void)last;
        check(first == 0x5a || data[0] % 2 == 0, "tensor bytes outside the data section", name);
      }
      spans.emplace_back(t.data, t.data + t.nbytes);
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      check(spans[i].first >= spans[i - 1].second || spans[i].first == spans[i].second ||
                spans[i - 1].first == spans[i - 1].second,
            "tensors overlap");
    }
  } catch (const spark::Error&) {
  }
  return 0;
}
