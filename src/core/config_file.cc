#include "core/config_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace myriad {

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(fmt::format("{}: is a directory, not a YAML file", path));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(fmt::format("{}: cannot read", path));
  return ss.str();
}

}  // namespace myriad
