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

}  // namespace spark
