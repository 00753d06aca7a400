#include "util/npy.h"

#include <fstream>
#include <string>

#include "spark/error.h"

namespace spark {

namespace {

void write_npy(const std::filesystem::path& path, const char* descr, const void* data, size_t elem_size,
               const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t count = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= d;
  }
  if (shape.size() > 1) dims.pop_back();
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path.string() + ": cannot write");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  out.put(static_cast<char>(len & 0xff));
  out.put(static_cast<char>(len >> 8));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(count * elem_size));
  if (!out) throw Error(path.string() + ": write failed");
}

}  // namespace

void write_npy_f32(const std::filesystem::path& path, const float* data, const std::vector<int64_t>& shape) {
  write_npy(path, "<f4", data, sizeof(float), shape);
}

void write_npy_i32(const std::filesystem::path& path, const int32_t* data,
                   const std::vector<int64_t>& shape) {
  write_npy(path, "<i4", data, sizeof(int32_t), shape);
}

}  // namespace spark
