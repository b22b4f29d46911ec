#include "net/etcd_codec.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "net/json_text.h"

namespace myriad::net {

using json = nlohmann::json;

std::string EtcdPrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

namespace {

// etcd's JSON gateway writes int64 as strings ("revision":"12").
absl::StatusOr<int64_t> Int64Field(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    try {
      size_t used = 0;
      int64_t v = std::stoll(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
  }
  return absl::InternalError(fmt::format("etcd answer: {}: not an integer: {}", field, it->dump()));
}

absl::StatusOr<std::string> Unbase64(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::string();
  std::string out;
  if (!it->is_string() || !absl::Base64Unescape(it->get<std::string>(), &out)) {
    return absl::InternalError(fmt::format("etcd answer: {}: not base64", field));
  }
  return out;
}

absl::StatusOr<EtcdKv> DecodeKv(const json& j) {
  if (!j.is_object()) return absl::InternalError("etcd answer: kv: not an object");
  EtcdKv kv;
  auto key = Unbase64(j, "key");
  if (!key.ok()) return key.status();
  auto value = Unbase64(j, "value");
  if (!value.ok()) return value.status();
  auto rev = Int64Field(j, "mod_revision");
  if (!rev.ok()) return rev.status();
  kv.key = *std::move(key);
  kv.value = *std::move(value);
  kv.mod_revision = *rev;
  auto created = Int64Field(j, "create_revision");
  if (!created.ok()) return created.status();
  kv.create_revision = *created;
  auto lease = Int64Field(j, "lease");
  if (!lease.ok()) return lease.status();
  kv.lease = *lease;
  return kv;
}

absl::StatusOr<int64_t> HeaderRevision(const json& j) {
  auto it = j.find("header");
  if (it == j.end() || !it->is_object()) return 0;
  return Int64Field(*it, "revision");
}

std::string ErrorText(const json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("message") && e["message"].is_string()) {
    return e["message"].get<std::string>();
  }
  return net::JsonText(e);
}

}  // namespace

absl::StatusOr<EtcdRange> DecodeRange(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InternalError("etcd range: answer is not JSON");
  if (j.contains("error")) {
    return absl::UnavailableError(fmt::format("etcd range: {}", ErrorText(j["error"])));
  }
  EtcdRange out;
  auto rev = HeaderRevision(j);
  if (!rev.ok()) return rev.status();
  if (*rev <= 0) return absl::InternalError("etcd range: header.revision missing");
  out.revision = *rev;
  if (auto it = j.find("kvs"); it != j.end() && it->is_array()) {
    for (const json& kvj : *it) {
      auto kv = DecodeKv(kvj);
      if (!kv.ok()) return kv.status();
      out.kvs.push_back(*std::move(kv));
    }
  }
  return out;
}

absl::StatusOr<EtcdWatchMessage> DecodeWatchLine(std::string_view line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InternalError("etcd watch: a line is not JSON");
  if (j.contains("error")) {
    return absl::UnavailableError(fmt::format("etcd watch: {}", ErrorText(j["error"])));
  }
  auto rit = j.find("result");
  if (rit == j.end() || !rit->is_object()) return absl::InternalError("etcd watch: no result");
  const json& r = *rit;
  EtcdWatchMessage m;
  m.created = r.value("created", false);
  m.canceled = r.value("canceled", false);
  if (auto it = r.find("cancel_reason"); it != r.end() && it->is_string()) m.cancel_reason = *it;
  auto compact = Int64Field(r, "compact_revision");
  if (!compact.ok()) return compact.status();
  if (*compact > 0) {
    m.canceled = true;
    if (m.cancel_reason.empty()) m.cancel_reason = fmt::format("compacted at revision {}", *compact);
  }
  auto rev = HeaderRevision(r);
  if (!rev.ok()) return rev.status();
  m.revision = *rev;
  if (auto it = r.find("events"); it != r.end() && it->is_array()) {
    for (const json& ej : *it) {
      if (!ej.is_object()) return absl::InternalError("etcd watch: an event is not an object");
      EtcdWatchEvent e;
      const std::string type = ej.value("type", std::string("PUT"));
      e.is_delete = type == "DELETE";
      auto kvit = ej.find("kv");
      if (kvit == ej.end()) return absl::InternalError("etcd watch: an event has no kv");
      auto kv = DecodeKv(*kvit);
      if (!kv.ok()) return kv.status();
      e.kv = *std::move(kv);
      m.events.push_back(std::move(e));
    }
  }
  return m;
}

absl::StatusOr<std::vector<std::string>> LineSplitter::Feed(std::string_view data) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (true) {
    const size_t nl = data.find('\n', start);
    if (nl == std::string_view::npos) break;
    pending_.append(data.substr(start, nl - start));
    if (!pending_.empty() && pending_.back() == '\r') pending_.pop_back();
    if (!pending_.empty()) lines.push_back(std::move(pending_));
    pending_.clear();
    start = nl + 1;
  }
  pending_.append(data.substr(start));
  if (pending_.size() > max_) {
    return absl::ResourceExhaustedError(
        fmt::format("etcd watch: a line exceeds {} bytes", max_));
  }
  return lines;
}

}  // namespace myriad::net
