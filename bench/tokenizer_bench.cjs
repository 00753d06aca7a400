// Reference side of the tokenizer benchmark: Hugging Face `tokenizers` (npm) encodes the same text,
// whole and line by line (encodeBatch; run with RAYON_NUM_THREADS=1 for one thread), median of N runs.
// usage: node tokenizer_bench.cjs MODULE_DIR TOKENIZER_JSON TEXT_FILE RUNS
"use strict";
const fs = require("fs");

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main() {
  const [moduleDir, tokenizerPath, textPath, runsArg] = process.argv.slice(2);
  const { Tokenizer } = require(moduleDir);
  const text = fs.readFileSync(textPath, "utf8");
  const mb = Buffer.byteLength(text, "utf8") / 1e6;
  const lines = text.split("\n").slice(0, -1).map((l) => l + "\n");
  const wholeMbS = [];
  const linesMbS = [];
  let idsWhole = 0;
  let idsLines = 0;
  for (let r = 0; r < Number(runsArg); r++) {
    let tok = Tokenizer.fromFile(tokenizerPath);  // fresh cache each run, as on our side
    let t0 = process.hrtime.bigint();
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    wholeMbS.push(mb / (Number(process.hrtime.bigint() - t0) / 1e9));
    idsWhole = enc.getIds().length;
    tok = Tokenizer.fromFile(tokenizerPath);
    t0 = process.hrtime.bigint();
    const encs = await tok.encodeBatch(lines, { addSpecialTokens: false });
    linesMbS.push(mb / (Number(process.hrtime.bigint() - t0) / 1e9));
    idsLines = encs.reduce((n, e) => n + e.getIds().length, 0);
  }
  console.log(JSON.stringify({ ids_whole: idsWhole, ids_lines: idsLines, whole_mb_s: wholeMbS,
    lines_mb_s: linesMbS, whole_median_mb_s: median(wholeMbS), lines_median_mb_s: median(linesMbS) }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
