#pragma once
// Typed reads out of YAML nodes for the config parsers (scenarios, gateway); every error names the file, the line
// and the key path ("default.yaml:12: pools[0].layout.tp: ...").
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/strings.h"
#include "core/time.h"

namespace myriad {

#define MYRIAD_RETURN_IF_ERROR(expr)         \
  do {                                       \
    if (absl::Status _st = (expr); !_st.ok()) return _st; \
  } while (0)

// Reads typed values out of YAML nodes; every error names the file, line and key path.
class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  absl::Status Error(const YAML::Node& n, const std::string& path, const std::string& msg) const {
    const YAML::Mark m = n.Mark();
    const std::string where = m.is_null() ? source_ : fmt::format("{}:{}", source_, m.line + 1);
    // The top level has no key path: "x.yaml:1: msg", not "x.yaml:1: : msg".
    if (path.empty()) return absl::InvalidArgumentError(fmt::format("{}: {}", where, msg));
    return absl::InvalidArgumentError(fmt::format("{}: {}: {}", where, path, msg));
  }

  absl::Status Map(const YAML::Node& n, const std::string& path,
                   std::initializer_list<const char*> allowed) const {
    if (!n.IsMap()) return Error(n, path, "expected a mapping");
    for (const auto& kv : n) {
      // A complex key (`? [a, b]`) is no name at all; as<std::string> would throw on it.
      if (!kv.first.IsScalar()) return Error(kv.first, path, "a key must be a plain name");
      const std::string key = kv.first.Scalar();
      bool known = false;
      for (const char* a : allowed) known |= key == a;
      if (!known) {
        std::vector<std::string> names(allowed.begin(), allowed.end());
        return Error(kv.first, Join(path, key),
                     fmt::format("unknown key (known here: {})", myriad::Join(names, ", ")));
      }
    }
    return absl::OkStatus();
  }

  // Reads each of a policy's fields present in `map` (policy::OptionFields' numbers and
  // durations, passed as spans of key and pointer).
  absl::Status Fields(const YAML::Node& map, const std::string& path,
                      std::span<const std::pair<const char*, double*>> numbers,
                      std::span<const std::pair<const char*, Nanos*>> durations) const {
    for (const auto& [key, out] : numbers) MYRIAD_RETURN_IF_ERROR(Get(map, key, path, out));
    for (const auto& [key, out] : durations) MYRIAD_RETURN_IF_ERROR(Duration(map, key, path, out));
    return absl::OkStatus();
  }

  // An option a policy's check refused (its key in `map`, and why): at the key's line, with the
  // value as written.
  absl::Status Refused(const YAML::Node& map, const std::string& path, const std::string& key,
                       const std::string& why) const {
    const YAML::Node n = map[key];
    return Error(n ? n : map, Join(path, key), n && n.IsScalar() ? fmt::format("{} (got {})", why, n.Scalar()) : why);
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  // Reads one scalar; `where` names it in errors. Numbers must be finite: a NaN passes every
  // "must be > 0" check written as `!(x <= 0)` and an infinity overflows what it scales.
  template <typename T>
  absl::Status Read(const YAML::Node& n, const std::string& where, T* out) const {
    if (!n.IsScalar()) return Error(n, where, "expected a single value");
    try {
      if constexpr (std::is_same_v<T, bool>) {
        *out = n.as<bool>();
      } else if constexpr (std::is_integral_v<T>) {
        const double v = n.as<double>();
        if (v != std::floor(v)) return Error(n, where, fmt::format("expected an integer, got '{}'", n.Scalar()));
        if (v < static_cast<double>(std::numeric_limits<T>::min()) ||
            v > static_cast<double>(std::numeric_limits<T>::max())) {
          return Error(n, where, fmt::format("{} is out of range", n.Scalar()));
        }
        *out = static_cast<T>(v);
      } else if constexpr (std::is_floating_point_v<T>) {
        const T v = n.as<T>();
        if (!std::isfinite(v)) return Error(n, where, fmt::format("expected a finite number, got '{}'", n.Scalar()));
        *out = v;
      } else {
        *out = n.as<T>();
      }
    } catch (const YAML::Exception&) {
      return Error(n, where, fmt::format("cannot read '{}' as {}", n.Scalar(), TypeName<T>()));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Get(const YAML::Node& map, const char* key, const std::string& path, T* out) const {
    const YAML::Node n = map[key];
    if (!n) return absl::OkStatus();
    return Read(n, Join(path, key), out);
  }

  // yaml-cpp keeps every pair of a mapping and `map[key]` finds the first, so a repeated key
  // would silently lose the value written last: rejected, naming both lines. Keys must be plain
  // scalars (a mapping as a key cannot name a setting).
  absl::Status UniqueKeys(const YAML::Node& n, const std::string& path = "") const {
    if (n.IsSequence()) {
      size_t i = 0;
      for (const YAML::Node& item : n) MYRIAD_RETURN_IF_ERROR(UniqueKeys(item, fmt::format("{}[{}]", path, i++)));
    } else if (n.IsMap()) {
      std::unordered_map<std::string, int> first_line;
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) return Error(kv.first, path, "a key must be a plain name");
        const std::string where = Join(path, kv.first.Scalar());
        const auto [it, fresh] = first_line.emplace(kv.first.Scalar(), kv.first.Mark().line + 1);
        if (!fresh) return Error(kv.first, where, fmt::format("duplicate key (first on line {})", it->second));
        MYRIAD_RETURN_IF_ERROR(UniqueKeys(kv.second, where));
      }
    }
    return absl::OkStatus();
  }

  // The node a dotted key path ("workload.sessions.think_time") names, or the deepest of its
  // ancestors that the file has, for an error's line when the value is a default.
  // (Recursive, not a loop: assigning to a yaml-cpp node rewrites the node it refers to.)
  static YAML::Node Deepest(const YAML::Node& n, std::string_view path) {
    if (path.empty() || !n.IsMap()) return n;
    const size_t dot = path.find('.');
    const YAML::Node child = n[std::string(path.substr(0, dot))];
    if (!child) return n;
    return Deepest(child, dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1));
  }

  absl::Status Duration(const YAML::Node& map, const char* key, const std::string& path, Nanos* out) const {
    const YAML::Node n = map[key];
    if (!n) return absl::OkStatus();
    if (!n.IsScalar()) return Error(n, Join(path, key), "expected a duration such as 90s or 1h");
    auto d = ParseDuration(n.Scalar());
    if (!d.ok()) return Error(n, Join(path, key), std::string(d.status().message()));
    *out = *d;
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Check(const YAML::Node& map, const char* key, const std::string& path, bool ok,
                     const std::string& what, T value) const {
    if (ok) return absl::OkStatus();
    const YAML::Node n = map[key];
    return Error(n ? n : map, Join(path, key), fmt::format("{} (got {})", what, value));
  }

 private:
  template <typename T>
  static const char* TypeName() {
    if constexpr (std::is_same_v<T, bool>) return "a boolean";
    else if constexpr (std::is_floating_point_v<T>) return "a number";
    else return "a string";
  }
  std::string source_;
};

}  // namespace myriad
