// Anonymous resident memory of this process (RssAnon): what the process really costs. VmRSS also counts
// mapped checkpoint pages, which the kernel can drop and re-read at will.
#pragma once

#include <cstdint>

namespace spark {

struct ProcessMemory {
  int64_t rss_anon_bytes = 0;
  int64_t rss_file_bytes = 0;
  int64_t vm_hwm_bytes = 0;  // peak VmRSS (anonymous + file) as the kernel tracks it
};

ProcessMemory read_process_memory();

// True in an AddressSanitizer build (GCC says __SANITIZE_ADDRESS__, clang __has_feature): RSS checks then
// allow for the shadow memory and the sanitizer allocator.
#if defined(__SANITIZE_ADDRESS__)
#define SPARK_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARK_ASAN_BUILD 1
#endif
#endif
#if defined(SPARK_ASAN_BUILD)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace spark
