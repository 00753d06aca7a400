// Minimal writer for NumPy .npy files (float32 / int32, C order): the exchange format between the C++
// engine and the numpy reference, and of the activation dumps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace spark {

void write_npy_f32(const std::filesystem::path& path, const float* data, const std::vector<int64_t>& shape);
void write_npy_i32(const std::filesystem::path& path, const int32_t* data, const std::vector<int64_t>& shape);

}  // namespace spark
