#include "tokenizer/bpe.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"

namespace myriad::tokenizer {
absl::StatusOr<BpeModel> BpeModel::Parse(const nlohmann::json& model, const std::string& field) {
  auto type = GetString(model, "type", field);
  if (!type.ok()) return type.status();
  if (*type != "BPE") return Unsupported(field + ".type", *type);
  BpeModel m;
  auto vit = model.find("vocab");
  if (vit == model.end() || !vit->is_object()) {
    return absl::InvalidArgumentError(Cat(field, ".vocab: expected an object of token -> id"));
  }
  m.vocab_.reserve(vit->size());
  uint32_t max_id = 0;
  for (auto it = vit->begin(); it != vit->end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= BpeModel::kNone) {
      return absl::InvalidArgumentError(Cat(field, ".vocab[\"", it.key(), "\"]: expected an id"));
    }
    const auto id = it.value().get<uint32_t>();
    m.vocab_[it.key()] = id;
    max_id = std::max(max_id, id);
  }
  m.id_to_token_.assign(m.vocab_.empty() ? 0 : max_id + 1, std::string());
  for (const auto& [token, id] : m.vocab_) m.id_to_token_[id] = token;

  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
      return Unsupported(Cat(field, ".", key), it->get<std::string>());
    }
  }
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    return absl::InvalidArgumentError(Cat(field, ".dropout: BPE dropout is not supported (inference is deterministic)"));
  }
  auto byte_fallback = GetBool(model, "byte_fallback", field, false);
  if (!byte_fallback.ok()) return byte_fallback.status();
  if (*byte_fallback) return Unsupported(field + ".byte_fallback", "true");
  auto ignore = GetBool(model, "ignore_merges", field, false);
  if (!ignore.ok()) return ignore.status();
  m.ignore_merges_ = *ignore;
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    if (auto id = m.TokenToId(it->get<std::string>())) m.unk_id_ = *id;
  }

  for (int b = 0; b < 256; ++b) {
    auto id = m.TokenToId(ByteLevelSpell(std::string(1, static_cast<char>(b))));
    m.byte_ids_[b] = id ? *id : m.unk_id_;
  }

  auto mit = model.find("merges");
  if (mit == model.end() || !mit->is_array()) {
    return absl::InvalidArgumentError(Cat(field, ".merges: expected an array"));
  }
  if (mit->size() >= (size_t{1} << 24)) {
    return absl::InvalidArgumentError(Cat(field, ".merges: more than 16,777,215 merges are not supported"));
  }
  std::vector<MergeTable::Entry> merges;
  merges.reserve(mit->size());
  std::string left, right;
  for (size_t i = 0; i < mit->size(); ++i) {
    const auto& e = (*mit)[i];
    // Two spellings: "a b" (older files) and ["a", "b"] (tokenizers >= 0.20).
    if (e.is_string()) {
      const auto& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return absl::InvalidArgumentError(Cat(field, ".merges[", i, "]: expected \"left right\", got \"", s, "\""));
      }
      left.assign(s, 0, sp);
      right.assign(s, sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(Cat(field, ".merges[", i, "]: expected \"a b\" or [\"a\", \"b\"]"));
    }
    auto a = m.TokenToId(left);
    auto b = m.TokenToId(right);
    auto c = m.TokenToId(left + right);
    if (!a || !b || !c) {
      return absl::InvalidArgumentError(Cat(field, ".merges[", i, "]: '", !a ? left : !b ? right : left + right,
                                                     "' is not in the vocabulary"));
    }
    // A repeated pair keeps its last rank, as Hugging Face's map insertion does.
    merges.push_back({*a, *b, *c});
  }
  m.merges_ = MergeTable(merges);
  m.byte_pairs_.assign(256 * 256, MergeTable::Merge{kNone, kNone});
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      if (m.byte_ids_[a] != kNone && m.byte_ids_[b] != kNone) {
        m.byte_pairs_[(a << 8) | b] = m.merges_.Find(m.byte_ids_[a], m.byte_ids_[b]);
      }
    }
  }
  m.BuildWholeWords();
  return m;
}

void BpeModel::BuildWholeWords() {
  // Raw bytes of every byte-level token.
  std::string arena;
  std::vector<std::pair<size_t, uint32_t>> spans;  // (offset into arena, id); length next
  std::vector<size_t> lengths;
  std::string raw;
  for (uint32_t id = 0; id < id_to_token_.size(); ++id) {
    if (id_to_token_[id].empty()) continue;
    raw.clear();
    if (!ByteLevelUnspell(id_to_token_[id], raw) || raw.size() > WordTable::kMaxWordBytes) continue;
    spans.push_back({arena.size(), id});
    lengths.push_back(raw.size());
    arena += raw;
  }
  whole_words_ = WordTable(spans.size(), spans.size() * 2 + arena.size() / 4 + spans.size());
  BpeScratch scratch;
  std::vector<uint32_t> ids;
  for (size_t k = 0; k < spans.size(); ++k) {
    const std::string_view word(arena.data() + spans[k].first, lengths[k]);
    const uint32_t id = spans[k].second;
    if (!ignore_merges_) {
      // With ignore_merges (Llama 3), any vocabulary word is taken whole; otherwise only
      // when the merges actually reach it.
      ids.clear();
      MergeWord(word, ids, scratch);
      if (ids.size() != 1 || ids[0] != id) continue;
    }
    // Two tokens may spell the same bytes; the first wins, as the map before did.
    const uint64_t hash = WordTable::Hash(word);
    if (whole_words_.Find(word, hash) == nullptr) whole_words_.Insert(word, hash, &id, 1);
  }
}

std::optional<uint32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::Encode(std::string_view word, std::vector<uint32_t>& out, BpeScratch& s) const {
  if (const uint32_t id = WholeWord(word); id != kNone) {
    out.push_back(id);
    return;
  }
  MergeWord(word, out, s);
}

void BpeModel::ByteIds(std::string_view word, BpeScratch& s) const {
  s.ids.clear();
  for (char c : word) {
    // A byte the vocabulary lacks becomes unk, or is dropped without one (as Hugging Face does).
    const uint32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id != kNone) s.ids.push_back(id);
  }
}

void BpeModel::EncodeReference(std::string_view word, std::vector<uint32_t>& out, BpeScratch& s) const {
  ByteIds(word, s);
  if (s.ids.size() <= 1) {
    out.insert(out.end(), s.ids.begin(), s.ids.end());
    return;
  }
  MergeHeap(out, s);
}

void BpeModel::MergeWord(std::string_view word, std::vector<uint32_t>& out, BpeScratch& s) const {
  ByteIds(word, s);
  if (s.ids.size() <= 1) {
    out.insert(out.end(), s.ids.begin(), s.ids.end());
    return;
  }
  if (s.ids.size() <= kLinearMax) {
    MergeLinear(s.ids.size() == word.size() ? word : std::string_view(), out, s.ids);
  } else {
    MergeHeap(out, s);
  }
}

void BpeModel::MergeLinear(std::string_view bytes, std::vector<uint32_t>& out, const std::vector<uint32_t>& in) const {
  // Fixed arrays on the stack: pair i is (ids[i], ids[i + 1]), with the rank and result of
  // merging it; a merge shifts the tails left by one.
  uint32_t ids[kLinearMax], ranks[kLinearMax], results[kLinearMax];
  const size_t n = in.size();
  std::copy(in.begin(), in.end(), ids);
  if (!bytes.empty()) {
    // One symbol per byte: the first merges come from the 256 x 256 table, which stays in the
    // processor's cache, instead of the large merge table.
    for (size_t i = 0; i + 1 < n; ++i) {
      const MergeTable::Merge m =
          byte_pairs_[(static_cast<uint8_t>(bytes[i]) << 8) | static_cast<uint8_t>(bytes[i + 1])];
      ranks[i] = m.rank;
      results[i] = m.result;
    }
  } else {
    for (size_t i = 0; i + 1 < n; ++i) {
      const MergeTable::Merge m = merges_.Find(ids[i], ids[i + 1]);
      ranks[i] = m.rank;
      results[i] = m.result;
    }
  }
  auto set_pair = [&](size_t i) {
    const MergeTable::Merge m = merges_.Find(ids[i], ids[i + 1]);
    ranks[i] = m.rank;
    results[i] = m.result;
  };
  size_t count = n;
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNone) break;
    ids[best] = results[best];
    // Symbol best + 1 is gone, and with it pair best + 1's old left side: shift both tails.
    std::copy(ids + best + 2, ids + count, ids + best + 1);
    std::copy(ranks + best + 1, ranks + count - 1, ranks + best);
    std::copy(results + best + 1, results + count - 1, results + best);
    --count;
    if (best > 0) set_pair(best - 1);
    if (best + 1 < count) set_pair(best);
  }
  out.insert(out.end(), ids, ids + count);
}

// Hugging Face's Word::merge_all (tokenizers/src/models/bpe/word.rs): a min-heap of candidate
// merges ordered by (rank, position); stale entries are skipped when popped.
void BpeModel::MergeHeap(std::vector<uint32_t>& out, BpeScratch& s) const {
  const size_t n = s.ids.size();
  auto& sym = s.symbols;
  sym.resize(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {s.ids[i], static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1, true};
  }
  auto& heap = s.heap;
  heap.clear();
  // std::push_heap keeps the largest on top: "larger" here means lower priority.
  auto worse = [](const BpeScratch::Candidate& x, const BpeScratch::Candidate& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  auto push = [&](uint32_t pos) {
    const int32_t next = sym[pos].next;
    if (next < 0) return;
    if (const uint32_t rank = merges_.Find(sym[pos].id, sym[next].id).rank; rank != kNone) {
      heap.push_back({rank, pos});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    auto& cur = sym[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    const int32_t next = cur.next;
    // Stale when the pair at pos changed since it was pushed. (Hugging Face compares the merged
    // id; a rank names one pair, so comparing ranks is the same test.)
    const MergeTable::Merge m = merges_.Find(cur.id, sym[next].id);
    if (m.rank != top.rank) continue;
    cur.id = m.result;
    sym[next].alive = false;
    cur.next = sym[next].next;
    if (cur.next >= 0) sym[cur.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) push(static_cast<uint32_t>(cur.prev));
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace myriad::tokenizer
