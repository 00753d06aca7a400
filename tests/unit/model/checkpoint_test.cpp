// Every checkpoint defect must end in one clear line naming the file and the tensor, never a crash.
// Each test writes a small generated checkpoint, corrupts it one way, and checks the error.
#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/synthetic_checkpoint.h"
#include "spark/error.h"

namespace spark {

namespace {

namespace fs = std::filesystem;

class CheckpointDefects : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spark-ckpt-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    write_synthetic_checkpoint({builtin_config("tiny"), 7, "BF16", 1, {}}, dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path file() const { return dir_ / "model.safetensors"; }

  std::string read_all(const fs::path& p) const {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write_all(const fs::path& p, const std::string& bytes) const {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  // Rewrites the header JSON in place, keeping the data section byte for byte.
  void edit_header(const std::function<void(nlohmann::ordered_json&)>& edit) const {
    std::string bytes = read_all(file());
    uint64_t len = 0;
    std::memcpy(&len, bytes.data(), 8);
    auto header = nlohmann::ordered_json::parse(bytes.substr(8, len));
    edit(header);
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    uint64_t new_len = text.size();
    std::string out(reinterpret_cast<const char*>(&new_len), 8);
    write_all(file(), out + text + bytes.substr(8 + len));
  }

  // Loads and returns the error text; fails the test if loading succeeds.
  std::string load_error() const {
    try {
      Checkpoint ck(dir_);
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "error must be one line: " << msg;
      return msg;
    }
    ADD_FAILURE() << "checkpoint loaded despite the defect";
    return "";
  }

  fs::path dir_;
};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "'" << (haystack) << "' lacks '" << (needle) << "'"

}  // namespace

TEST_F(CheckpointDefects, IntactCheckpointLoads) {
  Checkpoint ck(dir_);
  EXPECT_EQ(ck.config().num_layers, 8);
  EXPECT_EQ(ck.tensor("model.embedding.weight").shape, (std::vector<int64_t>{1024, 128}));
}

TEST_F(CheckpointDefects, MissingTensor) {
  edit_header([](auto& h) { h.erase("model.layers.2.mlp.up_proj.weight"); });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "missing tensor model.layers.2.mlp.up_proj.weight");
  EXPECT_CONTAINS(e, "model.safetensors");
}

TEST_F(CheckpointDefects, ExtraTensor) {
  edit_header([](auto& h) { h["model.layers.0.self_attn.q_norm.weight"] = h["model.norm.weight"]; });
  std::string e = load_error();
  // The extra entry shares the norm's bytes, which the overlap check may report first; either names it.
  EXPECT_CONTAINS(e, "model.layers.0.self_attn.q_norm.weight");
}

TEST_F(CheckpointDefects, ExtraTensorWithItsOwnData) {
  std::string bytes = read_all(file());
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  const uint64_t data_size = bytes.size() - 8 - len;
  edit_header([&](auto& h) {
    h["model.layers.0.self_attn.q_norm.weight"] = {
        {"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {data_size, data_size + 4}}};
  });
  write_all(file(), read_all(file()) + std::string(4, '\0'));
  std::string e = load_error();
  EXPECT_CONTAINS(e, "unexpected tensor model.layers.0.self_attn.q_norm.weight");
}

// A tied model whose export also stored the head loads, the head ignored; a head of the wrong shape is
// still a defect.
TEST_F(CheckpointDefects, StoredTiedHeadIsIgnored) {
  fs::remove_all(dir_);
  SyntheticCheckpointOptions o{builtin_config("tiny"), 7, "BF16", 1, {}};
  o.forms.stored_tied_head = true;
  write_synthetic_checkpoint(o, dir_);
  Checkpoint ck(dir_);
  EXPECT_TRUE(ck.has_tensor("lm_head.weight"));
  EXPECT_EQ(ck.tensor("lm_head.weight").shape, (std::vector<int64_t>{1024, 128}));

  edit_header([](auto& h) { h["lm_head.weight"]["shape"] = {512, 256}; });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "lm_head.weight");
  EXPECT_CONTAINS(e, "the tied embedding's");
}

// Real exports keep norms in F32 beside 16-bit matrices; the forms writer does the same.
TEST_F(CheckpointDefects, MixedDtypesLoad) {
  fs::remove_all(dir_);
  SyntheticCheckpointOptions o{builtin_config("tiny"), 7, "BF16", 1, {}};
  o.forms.mixed_dtypes = true;
  write_synthetic_checkpoint(o, dir_);
  Checkpoint ck(dir_);
  EXPECT_EQ(ck.tensor("model.norm.weight").dtype, "F32");
  EXPECT_EQ(ck.tensor("model.layers.0.mlp.up_proj.weight").dtype, "BF16");
}

// An index with more metadata than total_size, and files reached through symbolic links.
TEST_F(CheckpointDefects, IndexMetadataAndSymlinks) {
  fs::remove_all(dir_);
  const fs::path real = dir_.string() + "-real";
  fs::remove_all(real);
  SyntheticCheckpointOptions o{builtin_config("tiny"), 7, "BF16", 3, {}};
  o.forms.index_metadata = true;
  write_synthetic_checkpoint(o, real);
  fs::create_directories(dir_);
  for (const auto& e : fs::directory_iterator(real)) fs::create_symlink(e.path(), dir_ / e.path().filename());
  Checkpoint ck(dir_);
  EXPECT_EQ(ck.config().num_layers, 8);
  fs::remove_all(real);
}

TEST_F(CheckpointDefects, WrongShape) {
  edit_header([](auto& h) {
    auto& t = h["model.layers.1.self_attn.g_proj.weight"];
    t["shape"] = {2, 256};  // same byte count as [4, 128]
  });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.layers.1.self_attn.g_proj.weight");
  EXPECT_CONTAINS(e, "shape [2, 256], expected [4, 128]");
}

TEST_F(CheckpointDefects, WrongDtype) {
  edit_header([](auto& h) {
    auto& t = h["model.layers.0.input_layernorm.weight"];
    t["dtype"] = "I16";
  });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.layers.0.input_layernorm.weight");
  EXPECT_CONTAINS(e, "dtype I16");
}

TEST_F(CheckpointDefects, UnknownDtype) {
  edit_header([](auto& h) { h["model.norm.weight"]["dtype"] = "Q4_K"; });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.norm.weight");
  EXPECT_CONTAINS(e, "unknown dtype Q4_K");
}

TEST_F(CheckpointDefects, HeaderLengthPastEndOfFile) {
  std::string bytes = read_all(file());
  uint64_t huge = bytes.size() + 100;
  std::memcpy(bytes.data(), &huge, 8);
  write_all(file(), bytes);
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.safetensors");
  EXPECT_CONTAINS(e, "header length");
}

TEST_F(CheckpointDefects, HeaderIsNotJson) {
  std::string bytes = read_all(file());
  std::memcpy(bytes.data() + 8, "#!garbage", 9);
  write_all(file(), bytes);
  EXPECT_CONTAINS(load_error(), "header is not valid JSON");
}

TEST_F(CheckpointDefects, OverlappingDataOffsets) {
  edit_header([](auto& h) {
    auto a = h["model.layers.0.input_layernorm.weight"]["data_offsets"];
    auto& b = h["model.layers.0.post_attention_layernorm.weight"];
    b["data_offsets"] = {a[0].template get<uint64_t>() + 2, a[1].template get<uint64_t>() + 2};
  });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "overlap");
  EXPECT_CONTAINS(e, "model.layers.0.post_attention_layernorm.weight");
}

TEST_F(CheckpointDefects, OffsetsPastTheData) {
  edit_header([](auto& h) {
    auto& t = h["model.norm.weight"];
    t["data_offsets"] = {100000000, 100000256};
  });
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.norm.weight");
  EXPECT_CONTAINS(e, "run past the end");
}

TEST_F(CheckpointDefects, OffsetsDisagreeWithShape) {
  edit_header([](auto& h) {
    auto& t = h["model.norm.weight"];
    uint64_t begin = t["data_offsets"][0].template get<uint64_t>();
    t["data_offsets"] = {begin, begin + 10};
  });
  EXPECT_CONTAINS(load_error(), "shape and dtype need 256");
}

TEST_F(CheckpointDefects, TruncatedFile) {
  std::string bytes = read_all(file());
  write_all(file(), bytes.substr(0, bytes.size() - 1000));
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.safetensors");
  EXPECT_CONTAINS(e, "truncated");
}

TEST_F(CheckpointDefects, FileShorterThanHeaderLength) {
  write_all(file(), "abc");
  EXPECT_CONTAINS(load_error(), "truncated");
}

TEST_F(CheckpointDefects, UnsupportedConfig) {
  auto cfg = nlohmann::ordered_json::parse(read_all(dir_ / "config.json"));
  cfg["attention_bias"] = true;
  write_all(dir_ / "config.json", cfg.dump());
  std::string e = load_error();
  EXPECT_CONTAINS(e, "config.json");
  EXPECT_CONTAINS(e, "attention_bias");
}

TEST_F(CheckpointDefects, MissingConfig) {
  fs::remove(dir_ / "config.json");
  EXPECT_CONTAINS(load_error(), "config.json");
}

TEST_F(CheckpointDefects, NoWeights) {
  fs::remove(file());
  EXPECT_CONTAINS(load_error(), "no model.safetensors");
}

class ShardedCheckpointDefects : public CheckpointDefects {
 protected:
  void SetUp() override {
    CheckpointDefects::SetUp();
    fs::remove_all(dir_);
    write_synthetic_checkpoint({builtin_config("tiny"), 7, "BF16", 3, {}}, dir_);
  }
};

TEST_F(ShardedCheckpointDefects, ShardedCheckpointLoads) {
  Checkpoint ck(dir_);
  EXPECT_EQ(ck.tensor("model.norm.weight").file, "model-00003-of-00003.safetensors");
}

TEST_F(ShardedCheckpointDefects, MissingShard) {
  fs::remove(dir_ / "model-00002-of-00003.safetensors");
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model-00002-of-00003.safetensors");
  EXPECT_CONTAINS(e, "missing");
}

TEST_F(ShardedCheckpointDefects, IndexNamesTheWrongShard) {
  auto index = nlohmann::ordered_json::parse(read_all(dir_ / "model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors";
  write_all(dir_ / "model.safetensors.index.json", index.dump());
  std::string e = load_error();
  EXPECT_CONTAINS(e, "model.norm.weight");
}

TEST_F(ShardedCheckpointDefects, IndexIsNotJson) {
  write_all(dir_ / "model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_CONTAINS(load_error(), "model.safetensors.index.json");
}

}  // namespace spark
