#pragma once
// Texts the tokenizer tests encode: prose, code, numbers, whitespace runs, newlines, scripts,
// emoji, combining marks, special tokens, long strings. Characters where JavaScript's regex
// and Oniguruma (Hugging Face's) disagree on \s (U+0085, U+FEFF, U+180E) are left out: the
// reference is transformers.js, the target Hugging Face.
#include <random>
#include <string>
#include <vector>

namespace myriad::tokenizer::testing {

inline std::vector<std::string> Corpus() {
  std::vector<std::string> c = {
      "",
      "Hello, world!",
      "The quick brown fox jumps over the lazy dog.",
      "I'm sure you're right; he'll say they've done it, it's what we'd do. DON'T SHOUT, She'S here'LL",
      "'s 't 're 've 'm 'll 'd 'x 'S' ' '' rock'n'roll don\u2019t",
      "int main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return 0;\n}\n",
      "def f(x):\n\tif x > 0:\n\t\treturn x ** 2  # square\n\treturn -x\n\n\nprint(f(3))\r\n",
      "{\"key\": [1, 2.5, -3e10, null, true], \"nested\": {\"a\": \"b\"}}",
      "1234567890 3.14159 1,000,000 0x1F 12ab34 $100.00 2024-01-01 10:30pm v1.2.3",
      "\u0661\u0662\u0663 \u0664\u0665\u0666 \u00b2\u00b3 \u00bd \u216b \u2460\u2461",
      "a  b   c    d     e",
      "   leading spaces",
      "trailing spaces   ",
      "\t\ttabs\tand\t\tmore\t",
      "line1\nline2\r\nline3\n\n\nend\n",
      "  \n  \n\n   x  \r\n\r\n  ",
      "nbsp\u00a0here \u3000ideographic\u2003em\u2009thin",
      "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002",
      "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3002",
      "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.",
      "\u4e2d\u6587English\u6df7\u5408123456\u6587\u672c abc\u4e2d def",
      "I love \U0001F355 and \U0001F680! \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 family \U0001F44D\U0001F3FD \U0001F1EF\U0001F1F5\U0001F1FA\U0001F1F8",
      "e\u0301 vs \u00e9, A\u030a vs \u00c5, \ufb01 ligature, \u1100\u1161 jamo, Z\u0351\u0364\u036b\u0300",
      "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440! \u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5! "
      "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd "
      "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
      "!!!??? ... --- *** ### $$$ @@ %%% ^^ && || ~~ `` <<>> [[]] {{}}",
      "'quoted' \"double\" \u00abguillemets\u00bb \u201eGerman\u201c \u2014 dash \u2026 ellipsis",
      "https://example.com/path/to?q=1&r=two#frag user.name+tag@example.org",
      "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 \uff11\uff12\uff13 \uff01\uff1f",
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
      "<think>\nLet me reason.\n</think>\n\nThe answer is 42.<|endoftext|>",
      "text<|im_end|>more<|im_start|><|im_end|>  <|im_start|> spaced",
      "<|im_start <|unknown|> <|im_end| <think </think>",
      "<\uff5cbegin\u2581of\u2581sentence\uff5c>Hello<\uff5cUser\uff5c>hi<\uff5cAssistant\uff5c>Hey<\uff5cend\u2581of\u2581sentence\uff5c>",
      "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>get_weather",
      "MixedCASE camelCase snake_case kebab-case SCREAMING_CASE __dunder__ x86_64",
      "\x01\x02 control \x7f chars \x1b[31mred\x1b[0m",
      // Unicode 15.1 / 16.0 letters and digits, which Debian 12's ICU (15.0) does not know.
      "Garay \U00010D50\U00010D51's, CJK-I \U0002EBF0\U0002EBF1's, ram's horn \uA7CB's; digits "
      "\U00010D40\U00010D41\U00010D42 \U00016D70\U00016D71, Ol Onal \U0001E5D0\U0001E5D1'S",
  };
  // Long strings: a long varied paragraph, long runs that take the heap merge path.
  std::string para;
  for (int i = 0; i < 40; ++i) {
    para += "Paragraph " + std::to_string(i * 7919 % 1000) + ": the cluster routes request #" + std::to_string(i * 31) +
            " to unit-" + std::to_string(i % 13) + (i % 3 == 0 ? " (prefix hit)\n" : i % 3 == 1 ? "; queue\tdepth " : ", ok. ");
  }
  c.push_back(para);
  c.push_back(std::string(300, ' ') + "word" + std::string(77, '\n') + std::string(50, '\t'));
  c.push_back(std::string(500, 'a') + " " + std::string(333, '=') + " " + std::string(200, '7'));
  std::string b64;
  for (int i = 0; i < 1200; ++i) b64.push_back("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(i * 37 + i / 7) % 64]);
  c.push_back(b64);
  return c;
}

// Random strings over pieces that exercise every branch of the split patterns and the added
// tokens: letters of several scripts, digits of several kinds, whitespace of several kinds,
// CR/LF, apostrophes, ASCII and other punctuation, symbols, marks, emoji, CJK, kana, and
// fragments of special tokens. The same strings for the same seed.
inline std::vector<std::string> RandomTexts(int count, unsigned seed) {
  static const std::vector<std::string> pieces = {
      "a", "Z", "the", " of", "Hello", "'", "'s", "'LL", "s", "t", "re", " ", " ", "  ", "\t", "\r", "\n", "\r\n",
      "\n\n", "0", "42", "2024", "12345", "\u0661", "\u00bd", "\u2460", ".", ",", "!", "?", "-", "_", "$", "+", "=",
      "<", ">", "|", "\"", "(", ")", "[", "{", "#", "@", "&", "*", "/", "\\", "`", "~", "^", "%", ":", ";",
      "\u4e2d", "\u6587", "\u3042", "\u30ab", "\u30fc", "\uac00", "\u00e9", "e\u0301", "\u0301", "\u0416",
      "\u03a9", "\u05d0", "\u0627", "\u0928\u094d", "\u0e01\u0e34", "\u00a0", "\u3000", "\u2003", "\u2028",
      "\U0001F600", "\U0001F44D\U0001F3FD", "\u200d", "\u2764\ufe0f", "\u00ab", "\u2014", "\u2026", "\uff01",
      "\uff21", "\x01", "\x7f", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|im_",
      "<\uff5cUser\uff5c>", "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "\u2581", "\uff5c", "\u0120",
  };
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) s += pieces[rng() % pieces.size()];
    out.push_back(s);
  }
  return out;
}

}  // namespace myriad::tokenizer::testing
