#include "cli/tokenize_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/model_source.h"
#include "spark/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "util/bounded_json.h"

namespace spark {

namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string text;
  bool text_given = false;
  std::string file;
  bool json = false;
  bool jsonl = false;
  bool pieces = false;
  bool add_special_tokens = false;
};

struct DetokenizeOptions {
  std::string model_dir;
  std::string ids;
  bool ids_given = false;
  std::string file;
  bool json = false;
  bool jsonl = false;
  bool skip_special = false;
};

Tokenizer load_tokenizer(const std::string& model_dir) {
  return Tokenizer::from_model_dir(resolve_model_dir(model_dir));
}

// Opens --file, or stdin when none is given.
std::istream& input_stream(const std::string& file, std::ifstream& storage) {
  if (file.empty()) return std::cin;
  storage.open(file, std::ios::binary);
  if (!storage) throw Error(file + ": cannot read");
  return storage;
}

std::string read_all(std::istream& in) {
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_line(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(',');
    out += std::to_string(ids[i]);
  }
  return out;
}

std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] != ',' && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    const std::string item = text.substr(i, j - i);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX) throw Error("'" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  return ids;
}

// What one text turns into: its ids, or with --pieces the pre-tokenizer's pieces written in the
// byte-level alphabet (as `tokenizers` shows them), as JSON.
nlohmann::json tokenize_one(const Tokenizer& tok, const std::string& text, bool pieces,
                            bool add_special_tokens) {
  if (!pieces) return tok.encode(text, add_special_tokens);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : tok.pre_tokenize(text)) out.push_back(byte_level::encode(p));
  return out;
}

// --jsonl: every input line is a JSON string (or {"text": string}); every output line the JSON array
// of its ids (or pieces), in order.
int run_tokenize_jsonl(const Tokenizer& tok, std::istream& in, bool pieces, bool add_special_tokens) {
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = parse_json_bounded(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error("input line " + std::to_string(n) + ": invalid JSON (" + e.what() + ")");
    }
    if (j.is_object() && j.contains("text")) j = j["text"];
    if (!j.is_string())
      throw Error("input line " + std::to_string(n) + ": expected a JSON string or {\"text\": ...}");
    write_line(
        tokenize_one(tok, j.get_ref<const std::string&>(), pieces, add_special_tokens).dump(-1, ' ', true));
  }
  return 0;
}

int run_tokenize(const TokenizeOptions& o) {
  const Tokenizer tok = load_tokenizer(o.model_dir);
  std::ifstream file;
  if (o.jsonl) {
    if (o.text_given) throw Error("--jsonl reads --file or stdin, not --text");
    return run_tokenize_jsonl(tok, input_stream(o.file, file), o.pieces, o.add_special_tokens);
  }
  if (o.text_given && !o.file.empty()) throw Error("give --text or --file, not both");
  const std::string text = o.text_given ? o.text : read_all(input_stream(o.file, file));
  if (o.pieces) {
    write_line(tokenize_one(tok, text, true, false).dump(-1, ' ', true));
    return 0;
  }
  const std::vector<int32_t> ids = tok.encode(text, o.add_special_tokens);
  if (o.json) {
    write_line(nlohmann::json{{"ids", ids}, {"count", ids.size()}}.dump());
  } else {
    write_line(join_ids(ids));
  }
  return 0;
}

int run_detokenize(const DetokenizeOptions& o) {
  const Tokenizer tok = load_tokenizer(o.model_dir);
  std::ifstream file;
  if (o.jsonl) {
    if (o.ids_given) throw Error("--jsonl reads --file or stdin, not --ids");
    // Every input line is a JSON array of ids; every output line the JSON string they decode to.
    std::istream& in = input_stream(o.file, file);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      std::vector<int32_t> ids;
      try {
        ids = parse_json_bounded(line).get<std::vector<int32_t>>();
      } catch (const nlohmann::json::exception& e) {
        throw Error("input line " + std::to_string(n) + ": expected a JSON array of ids (" + e.what() + ")");
      }
      // ASCII-only JSON: a raw U+2028 or U+0085 would split the line for some line readers.
      write_line(nlohmann::json(tok.decode(ids, o.skip_special)).dump(-1, ' ', true));
    }
    return 0;
  }
  if (o.ids_given && !o.file.empty()) throw Error("give --ids or --file, not both");
  const std::vector<int32_t> ids = parse_id_list(o.ids_given ? o.ids : read_all(input_stream(o.file, file)));
  const std::string text = tok.decode(ids, o.skip_special);
  if (o.json) {
    write_line(nlohmann::json{{"text", text}}.dump());
  } else {
    write_line(text);
  }
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int& exit_code) {
  auto t = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "Print the token ids of a text (no BOS/EOS is added unless --add-special-tokens)");
  tokenize->add_option("--model", t->model_dir,
                       "Checkpoint folder (default: the built-in random-weight demo)");
  tokenize->add_option("--text", t->text, "Text to tokenize (default: --file, else stdin)");
  tokenize->add_option("--file", t->file, "Read the text (or the --jsonl lines) from this file");
  tokenize->add_flag("--json", t->json, "Print {\"ids\": [...], \"count\": n}");
  tokenize->add_flag(
      "--jsonl", t->jsonl,
      "Batch mode: each input line is a JSON string (or {\"text\": ...}), each output line the "
      "JSON array of its ids");
  tokenize->add_flag(
      "--pieces", t->pieces,
      "Print the pre-tokenizer's pieces (byte-level text, no added tokens cut out) instead of ids");
  tokenize->add_flag("--add-special-tokens", t->add_special_tokens,
                     "Put the tokenizer's special tokens (its post-processor's, e.g. a BOS) around the ids");
  tokenize->callback([t, tokenize, &exit_code] {
    t->text_given = tokenize->count("--text") > 0;
    exit_code = run_tokenize(*t);
  });

  auto d = std::make_shared<DetokenizeOptions>();
  CLI::App* detokenize = app.add_subcommand("detokenize", "Print the text of token ids");
  detokenize->add_option("--model", d->model_dir,
                         "Checkpoint folder (default: the built-in random-weight demo)");
  detokenize->add_option("--ids", d->ids, "Comma-separated token ids (default: --file, else stdin)");
  detokenize->add_option("--file", d->file, "Read the ids (or the --jsonl lines) from this file");
  detokenize->add_flag("--skip-special-tokens", d->skip_special, "Leave out added tokens marked special");
  detokenize->add_flag("--json", d->json, "Print {\"text\": ...} (exact, where plain output adds a newline)");
  detokenize->add_flag("--jsonl", d->jsonl,
                       "Batch mode: each input line is a JSON array of ids, each output line the JSON string "
                       "they decode to");
  detokenize->callback([d, detokenize, &exit_code] {
    d->ids_given = detokenize->count("--ids") > 0;
    exit_code = run_detokenize(*d);
  });
}

}  // namespace spark
