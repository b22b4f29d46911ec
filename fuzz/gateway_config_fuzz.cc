// libFuzzer target for what an operator or etcd hands the gateway: any YAML config must parse
// or be refused with InvalidArgument naming the file; any etcd registration (key and value of
// any bytes) must decode or be refused. Never a crash or an exception (a complex YAML key and a
// non-UTF-8 key both were), and whatever is accepted holds names that JSON can carry.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/strings.h"
#include "gateway/config.h"
#include "gateway/etcd_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    auto c = myriad::gateway::ParseGatewayConfig(input, "fuzz.yaml");
    if (!c.ok()) {
      if (c.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
      if (std::string(c.status().message()).rfind("fuzz.yaml", 0) != 0) std::abort();
      return 0;
    }
    if (c->threads < 1 || c->max_body_bytes > myriad::gateway::kMaxBodyBytes) std::abort();
    for (const auto& b : c->backends) {
      if (!myriad::IsValidUtf8(b.name)) std::abort();
    }
    return 0;
  }
  // Registration: the key is the input up to the first newline, the value the rest.
  const size_t nl = input.find('\n');
  const std::string_view key = input.substr(0, nl);
  const std::string_view value = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
  auto b = myriad::gateway::DecodeRegistration(key, value);
  if (b.ok() && !myriad::IsValidUtf8(b->name)) std::abort();
  if (!b.ok() && !myriad::IsValidUtf8(std::string(b.status().message()))) std::abort();
  return 0;
}
