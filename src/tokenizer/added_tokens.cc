#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "tokenizer/unicode.h"

namespace myriad::tokenizer {
namespace {

bool IsWordChar(uint8_t cls, uint32_t cp) { return (cls & (kLetter | kNumber)) || cp == '_'; }

// The class and code point of the last character before `end`.
uint32_t LastChar(std::string_view s, size_t end, uint8_t& cls) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
  size_t len;
  const uint32_t cp = DecodeUtf8(s, start, len);
  cls = ClassOf(cp);
  return cp;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedToken*>& tokens) : tokens_(tokens) {
  // Build with ordered maps, then flatten into contiguous sorted edges.
  struct Tmp {
    int32_t token = -1;
    std::map<uint8_t, std::unique_ptr<Tmp>> kids;
  };
  Tmp root;
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& c = tokens_[t]->content;
    if (c.empty()) continue;
    first_byte_[static_cast<uint8_t>(c[0])] = true;
    Tmp* n = &root;
    for (char ch : c) {
      auto& kid = n->kids[static_cast<uint8_t>(ch)];
      if (!kid) kid = std::make_unique<Tmp>();
      n = kid.get();
    }
    n->token = static_cast<int32_t>(t);  // a later duplicate wins, like the later id in HF's map
  }
  int distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if (first_byte_[b]) {
      ++distinct;
      only_first_byte_ = b;
    }
  }
  if (distinct != 1) only_first_byte_ = -1;
  // Breadth-first so each node's children get consecutive edges.
  std::vector<const Tmp*> order{&root};
  nodes_.push_back({root.token, 0, 0});
  for (size_t i = 0; i < order.size(); ++i) {
    const Tmp* t = order[i];
    nodes_[i].first_child = static_cast<uint32_t>(edges_.size());
    nodes_[i].child_count = static_cast<uint32_t>(t->kids.size());
    for (const auto& [byte, kid] : t->kids) {
      edges_.push_back({byte, static_cast<uint32_t>(order.size())});
      order.push_back(kid.get());
      nodes_.push_back({kid->token, 0, 0});
    }
  }
}

int32_t AddedTokenMatcher::LongestAt(std::string_view text, size_t i, size_t& len) const {
  int32_t best = -1;
  uint32_t node = 0;
  for (size_t j = i; j < text.size(); ++j) {
    const Node& n = nodes_[node];
    const auto b = static_cast<uint8_t>(text[j]);
    const Edge* first = edges_.data() + n.first_child;
    const Edge* last = first + n.child_count;
    const Edge* e = std::lower_bound(first, last, b, [](const Edge& x, uint8_t v) { return x.byte < v; });
    if (e == last || e->byte != b) break;
    node = e->node;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      len = j + 1 - i;
    }
  }
  return best;
}

bool AddedTokenMatcher::Next(std::string_view text, size_t from, Match& match) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (only_first_byte_ >= 0) {
      // All tokens start with the same byte ('<' in most models): memchr skips the prose.
      const void* p = std::memchr(text.data() + i, only_first_byte_, text.size() - i);
      if (p == nullptr) return false;
      i = static_cast<size_t>(static_cast<const char*>(p) - text.data());
    } else if (!first_byte_[static_cast<uint8_t>(text[i])]) {
      continue;
    }
    size_t len = 0;
    const int32_t t = LongestAt(text, i, len);
    if (t < 0) continue;
    const AddedToken* tok = tokens_[t];
    size_t begin = i, end = i + len;
    if (tok->single_word) {
      bool word_before = false;
      if (begin > 0) {
        uint8_t cls = 0;
        const uint32_t cp = LastChar(text, begin, cls);
        word_before = IsWordChar(cls, cp);
      }
      size_t clen;
      const bool word_after = end < text.size() && [&] {
        const uint32_t cp = DecodeUtf8(text, end, clen);
        return IsWordChar(ClassOf(cp), cp);
      }();
      if (word_before || word_after) continue;
    }
    if (tok->lstrip) {
      while (begin > from) {
        uint8_t cls = 0;
        LastChar(text, begin, cls);
        if (!(cls & kSpace)) break;
        size_t start = begin - 1;
        while (start > from && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
        begin = start;
      }
    }
    if (tok->rstrip) {
      size_t clen;
      while (end < text.size() && (ClassAt(text, end, clen) & kSpace)) end += clen;
    }
    match = {begin, end, tok};
    return true;
  }
  return false;
}

}  // namespace myriad::tokenizer
