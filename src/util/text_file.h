// Whole-file text I/O with the project's one-line errors ("PATH: cannot read").
#pragma once

#include <filesystem>
#include <string>

namespace spark {

// The file's bytes, unchanged (binary mode). Throws spark::Error naming the path if it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

// Replaces the file's contents with `text`. Throws spark::Error naming the path on any failure.
void write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace spark
