#pragma once
// The scenario parsers' name for core's YamlReader.
#include "core/yaml_reader.h"

namespace myriad::sim {
using Reader = YamlReader;
}  // namespace myriad::sim
