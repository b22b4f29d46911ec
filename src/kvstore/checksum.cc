#include "kvstore/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace myriad::kvstore {

uint64_t ObjectChecksum(std::string_view bytes) {
  const uint64_t h = XXH3_64bits(bytes.data(), bytes.size());
  return h == 0 ? 1 : h;
}

}  // namespace myriad::kvstore
