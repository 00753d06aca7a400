#include "util/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace spark {

ProcessMemory read_process_memory() {
  ProcessMemory mem;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    fields >> key >> kib;
    if (key == "RssAnon:") mem.rss_anon_bytes = kib * 1024;
    if (key == "RssFile:") mem.rss_file_bytes = kib * 1024;
    if (key == "VmHWM:") mem.vm_hwm_bytes = kib * 1024;
  }
  return mem;
}

}  // namespace spark
