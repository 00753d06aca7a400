// Files a checkpoint names are read whole: a device in their place must be an error at once, not a read
// that never ends (/dev/zero), and a FIFO named as a weight file must not block the open forever. (Text
// files may be pipes: `--chat-template <(...)`.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "spark/error.h"
#include "util/mapped_file.h"
#include "util/text_file.h"

namespace spark {
namespace {

TEST(FileReading, ADeviceOrAWeightFifoIsAnErrorNotAHang) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spark-file-reading-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path fifo = dir / "model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::filesystem::path& p : {fifo, std::filesystem::path("/dev/zero")}) {
    try {
      MappedFile f(p);
      ADD_FAILURE() << p << " mapped";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
  try {
    read_text_file("/dev/zero");
    ADD_FAILURE() << "/dev/zero read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spark
