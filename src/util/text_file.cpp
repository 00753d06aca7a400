#include "util/text_file.h"

#include <fstream>
#include <sstream>

#include "spark/error.h"

namespace spark {

std::string read_text_file(const std::filesystem::path& path) {
  // A FIFO would block the read forever and a device (/dev/zero) never ends: only regular files.
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw Error(path.string() + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path.string() + ": read failed");
  return ss.str();
}

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path.string() + ": cannot write");
  out << text;
  out.flush();
  if (!out) throw Error(path.string() + ": write failed (disk full?)");
}

}  // namespace spark
