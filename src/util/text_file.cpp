#include "util/text_file.h"

#include <fstream>
#include <sstream>

#include "spark/error.h"

namespace spark {

std::string read_text_file(const std::filesystem::path& path) {
  // A device (/dev/zero) never ends. A pipe is read to its end (`--chat-template <(...)`); a checkpoint's
  // files are mapped, and a FIFO there is refused by MappedFile.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::is_character_file(st) || std::filesystem::is_block_file(st) ||
      std::filesystem::is_socket(st)) {
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
