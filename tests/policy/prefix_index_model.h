#pragma once
// A straightforward model of PrefixIndex's documented semantics (no eviction), for the tests
// to compare the index against.
#include <map>
#include <span>
#include <string>
#include <vector>

#include "policy/prefix_index.h"

namespace myriad::policy::test {

// A straightforward model of the documented semantics (no eviction) to compare against.
class Model {
 public:
  Model(int every, Nanos ttl) : every_(every), ttl_(ttl) {}
  void Stored(HolderId h, uint32_t pos, std::span<const BlockKey> b, Nanos now) {
    Expire(now);
    for (size_t i = 0; i < b.size(); ++i) {
      if ((pos + i + 1) % every_ == 0) map_[b[i]][h] = {};
    }
  }
  void AddProvisional(HolderId h, uint32_t pos, std::span<const BlockKey> b, Nanos now) {
    Expire(now);
    for (size_t i = 0; i < b.size(); ++i) {
      if ((pos + i + 1) % every_ != 0) continue;
      auto& holders = map_[b[i]];
      auto it = holders.find(h);
      if (it != holders.end() && !it->second.prov) continue;
      holders[h] = {.prov = true, .expiry = now + ttl_};
    }
  }
  void Removed(HolderId h, std::span<const BlockKey> b) {
    for (BlockKey k : b) {
      auto it = map_.find(k);
      if (it == map_.end()) continue;
      it->second.erase(h);
      if (it->second.empty()) map_.erase(it);
    }
  }
  void Cleared(HolderId h) {
    for (auto it = map_.begin(); it != map_.end();) {
      it->second.erase(h);
      it = it->second.empty() ? map_.erase(it) : std::next(it);
    }
  }
  void MarkSuspect(HolderId h) {
    for (auto& [k, holders] : map_) {
      if (auto it = holders.find(h); it != holders.end()) it->second.suspect = true;
    }
  }
  std::vector<PrefixMatch> Match(std::span<const BlockKey> b, Nanos now) {
    Expire(now);
    std::vector<PrefixMatch> out;
    const size_t count = b.size() / every_;
    if (count == 0) return out;
    auto first = map_.find(b[every_ - 1]);
    if (first == map_.end()) return out;
    for (const auto& [h, e0] : first->second) {
      PrefixMatch m{.holder = h};
      for (size_t j = 0; j < count; ++j) {
        auto it = map_.find(b[(j + 1) * every_ - 1]);
        if (it == map_.end() || !it->second.count(h)) break;
        const Entry& e = it->second.at(h);
        m.matched_blocks = static_cast<uint32_t>((j + 1) * every_);
        m.suspect |= e.suspect;
        m.provisional |= e.prov;
      }
      out.push_back(m);
    }
    return out;
  }
  size_t entries() const {
    size_t n = 0;
    for (const auto& [k, holders] : map_) n += holders.size();
    return n;
  }
  size_t blocks() const { return map_.size(); }

 private:
  struct Entry {
    bool prov = false;
    Nanos expiry = 0;
    bool suspect = false;
  };
  void Expire(Nanos now) {
    for (auto it = map_.begin(); it != map_.end();) {
      std::erase_if(it->second,
                    [now](const auto& e) { return e.second.prov && e.second.expiry <= now; });
      it = it->second.empty() ? map_.erase(it) : std::next(it);
    }
  }
  size_t every_;
  Nanos ttl_;
  std::map<BlockKey, std::map<HolderId, Entry>> map_;
};

inline std::string Str(const std::vector<PrefixMatch>& v) {
  std::string s;
  for (const auto& m : v) {
    s += std::to_string(m.holder) + ":" + std::to_string(m.matched_blocks) +
         (m.suspect ? "s" : "") + (m.provisional ? "p" : "") + " ";
  }
  return s;
}

}  // namespace myriad::policy::test
