#pragma once
// The end-to-end checksum of an object's bytes: computed by the writer at put, kept by the
// master with the object, checked by readers (StoreClient) and by a repair's source node before
// it pushes a copy (COPY_TO), so bytes changed on a node are neither returned nor spread.
#include <cstdint>
#include <string_view>

namespace myriad::kvstore {

// XXH3-64 of the bytes; never 0, which means "no checksum" (objects written before checksums).
uint64_t ObjectChecksum(std::string_view bytes);

}  // namespace myriad::kvstore
