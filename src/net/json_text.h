#pragma once
// JSON text for the wire and the logs. Strings from outside (an etcd key, a header, a name in a
// config) may hold invalid UTF-8; nlohmann's default dump throws on them (type_error.316), which
// on a server thread aborts the process. Here such bytes become U+FFFD instead.
#include <nlohmann/json.hpp>

#include <string>

namespace myriad::net {

inline std::string JsonText(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace myriad::net
