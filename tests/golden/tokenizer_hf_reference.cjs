// Reference side of the tokenizer parity test: Hugging Face `tokenizers` (npm) reads JSON-lines strings
// and writes one JSON line per string.
//   encode mode: {"ids", "ids_special", "decoded", "decoded_skip"}: encode without and with special
//                tokens (the post-processor's), and what the first ids decode to with and without special
//                tokens;
//   pieces mode: the pre-tokenizer's pieces (as pre_tokenize_str gives them).
// usage: node tokenizer_hf_reference.cjs encode|pieces MODULE_DIR TOKENIZER_JSON INPUT_JSONL OUTPUT_JSONL
"use strict";
const fs = require("fs");

async function main() {
  const [mode, moduleDir, tokenizerPath, inputPath, outputPath] = process.argv.slice(2);
  const { Tokenizer } = require(moduleDir);
  const tok = Tokenizer.fromFile(tokenizerPath);
  const lines = fs.readFileSync(inputPath, "utf8").split("\n").filter((l) => l.length > 0);
  const out = [];
  const pre = tok.getPreTokenizer();
  for (const line of lines) {
    const text = JSON.parse(line);
    if (mode === "pieces") {
      out.push(JSON.stringify(pre.preTokenizeString(text).map((p) => p[0])));
      continue;
    }
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const encSpecial = await tok.encode(text, null, { addSpecialTokens: true });
    const idsSpecial = Array.from(encSpecial.getIds());
    const decoded = await tok.decode(ids, false);
    const decodedSkip = await tok.decode(ids, true);
    out.push(JSON.stringify({ ids, ids_special: idsSpecial, decoded, decoded_skip: decodedSkip }));
  }
  fs.writeFileSync(outputPath, out.join("\n") + "\n");
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
