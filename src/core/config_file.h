#pragma once
// Reads a configuration file whole, with the errors every config loader gives: a directory, a
// file that cannot be opened, a read error, each naming the path.
#include <string>

#include "absl/status/statusor.h"

namespace myriad {

absl::StatusOr<std::string> ReadConfigFile(const std::string& path);

}  // namespace myriad
