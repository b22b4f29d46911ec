// vLLM KV-event codec. The golden payloads come from tests/net/kv_event_goldens.py
// (python3-msgpack, independent of our encoder), in the shapes vLLM's msgspec structs take.
#include "net/kv_events.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"

namespace myriad::net {
namespace {

std::vector<uint8_t> Hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// tests/net/kv_event_goldens.py output.
constexpr std::string_view kArrayBatch =
    "93cb41da13b8601000009398ab426c6f636b53746f72656492cfffeeddccbbaa99882ac0dc00206465666768696a"
    "6b6c6d6e6f707172737475767778797a7b7c7d7e7fcc80cc81cc82cc8310c0a3475055c093ac426c6f636b52656d"
    "6f76656491cfffeeddccbbaa9988a347505591b0416c6c426c6f636b73436c656172656403";
constexpr std::string_view kArrayBatchOldest =
    "92cb41da13b8601000009295ab426c6f636b53746f726564910705dc00106465666768696a6b6c6d6e6f70717273"
    "1092ac426c6f636b52656d6f7665649107";
constexpr std::string_view kMapBatch =
    "83a27473cb41da13b860100000a66576656e74739389a474797065ab426c6f636b53746f726564ac626c6f636b5f"
    "68617368657392cfffeeddccbbaa99882ab1706172656e745f626c6f636b5f6861736809a9746f6b656e5f696473"
    "dc00206465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7fcc80cc81cc82cc83aa626c6f636b5f"
    "73697a6510a76c6f72615f6964c0a66d656469756da3435055a96c6f72615f6e616d65a9616461707465722d61a9"
    "67726f75705f6964780184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f686173686573912aa66d"
    "656469756da3435055a967726f75705f6964780181a474797065b0416c6c426c6f636b73436c6561726564b26461"
    "74615f706172616c6c656c5f72616e6b02";
// d1 = sha256("block-1"), d2 = sha256("block-2"); their last 8 bytes big-endian:
constexpr uint64_t kD1 = 0xbf17ef8473ec96e9ULL;
constexpr uint64_t kD2 = 0x30e2acea3be39f57ULL;
constexpr std::string_view kMixedBatch =
    "94cb41da13b8601000009489a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391c42024"
    "53695514ac2ba4f06e40a20e20cbc76b7a6c6d9a438c4a30e2acea3be39f57b1706172656e745f626c6f636b5f68"
    "617368c42089a1a98e709fa672374b463bbd8d5946ff4f530c5e65be07bf17ef8473ec96e9a9746f6b656e5f6964"
    "73dc00106465666768696a6b6c6d6e6f70717273aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469"
    "756da3475055a96c6f72615f6e616d65c0ac6675747572655f6669656c64920181a1780282a474797065ab426c6f"
    "636b50696e6e6564ac626c6f636b5f68617368657391c4202453695514ac2ba4f06e40a20e20cbc76b7a6c6d9a43"
    "8c4a30e2acea3be39f5794ac426c6f636b4576696374656401020396ac426c6f636b52656d6f76656492c42089a1"
    "a98e709fa672374b463bbd8d5946ff4f530c5e65be07bf17ef8473ec96e94da347505500a6667574757265920102"
    "c0b0747261696c696e672d756e6b6e6f776e";

constexpr uint64_t kBig = 0xFFEEDDCCBBAA9988ULL;  // above INT64_MAX
constexpr double kTs = 1750000000.25;

std::vector<uint32_t> Tokens(uint32_t first, size_t n) {
  std::vector<uint32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

absl::StatusOr<KvEventBatch> Decode(std::string_view hex) { return DecodeKvEventBatch(Hex(hex)); }

TEST(KvEventsDecode, OlderArrayFormWithHashAboveInt64Max) {
  auto b = Decode(kArrayBatch);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ts, kTs);
  EXPECT_EQ(b->dp_rank, 3);
  ASSERT_EQ(b->events.size(), 3u);
  const auto& stored = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<uint64_t>{kBig, 42}));
  EXPECT_FALSE(stored.parent_block_hash.has_value());
  EXPECT_EQ(stored.token_ids, Tokens(100, 32));
  EXPECT_EQ(stored.block_size, 16u);
  EXPECT_EQ(stored.medium, "GPU");
  EXPECT_FALSE(stored.lora_name.has_value());
  EXPECT_FALSE(stored.group_idx.has_value());
  const auto& removed = std::get<BlockRemoved>(b->events[1]);
  EXPECT_EQ(removed.block_hashes, std::vector<uint64_t>{kBig});
  EXPECT_EQ(removed.medium, "GPU");
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(b->events[2]));
  EXPECT_EQ(b->unknown_events, 0u);
}

TEST(KvEventsDecode, OmittedTrailingFieldsTakeTheirDefaults) {
  auto b = Decode(kArrayBatchOldest);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->dp_rank.has_value());
  ASSERT_EQ(b->events.size(), 2u);
  const auto& stored = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(stored.block_hashes, std::vector<uint64_t>{7});
  EXPECT_EQ(stored.parent_block_hash, 5u);
  EXPECT_FALSE(stored.medium.has_value());
  const auto& removed = std::get<BlockRemoved>(b->events[1]);
  EXPECT_FALSE(removed.medium.has_value());
}

TEST(KvEventsDecode, NewerMapForm) {
  auto b = Decode(kMapBatch);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dp_rank, 2);
  ASSERT_EQ(b->events.size(), 3u);
  const auto& stored = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<uint64_t>{kBig, 42}));
  EXPECT_EQ(stored.parent_block_hash, 9u);
  EXPECT_EQ(stored.medium, "CPU");
  EXPECT_EQ(stored.lora_name, "adapter-a");
  EXPECT_EQ(stored.group_idx, 1);
  const auto& removed = std::get<BlockRemoved>(b->events[1]);
  EXPECT_EQ(removed.group_idx, 1);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(b->events[2]));
}

TEST(KvEventsDecode, BytesHashesUnknownFieldsAndUnknownTags) {
  auto b = Decode(kMixedBatch);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->dp_rank.has_value());  // nil
  EXPECT_EQ(b->unknown_events, 2u);       // BlockPinned (map), BlockEvicted (array)
  ASSERT_EQ(b->events.size(), 2u);
  const auto& stored = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(stored.block_hashes, std::vector<uint64_t>{kD2});
  EXPECT_EQ(stored.parent_block_hash, kD1);
  const auto& removed = std::get<BlockRemoved>(b->events[1]);
  EXPECT_EQ(removed.block_hashes, (std::vector<uint64_t>{kD1, 77}));
  EXPECT_EQ(removed.group_idx, 0);
}

// vLLM 0.9.0 to 0.10.1 send Python's hash(), signed: each negative encoding msgpack has
// (negative fixint, int8, int16, int32, int64), in block_hashes and parent_block_hash, decodes
// to its two's complement, the batch an unsigned engine would send for the same blocks.
TEST(KvEventsDecode, SignedHashesAreTheirTwosComplement) {
  std::string hex =
      "92 01 92"
      // ["BlockStored", [-1, -128, -32768, INT64_MIN], -5 (int32), tokens 0..63, 16]
      "95 ab426c6f636b53746f726564"
      "94 ff d080 d18000 d38000000000000000"
      "d2fffffffb"
      "dc0040";
  for (int t = 0; t < 64; ++t) hex += fmt::format("{:02x}", t);
  hex +=
      "10"
      // ["BlockRemoved", [INT64_MIN, -2 (int64, not the smallest form)], nil]
      "93 ac426c6f636b52656d6f766564 92 d38000000000000000 d3fffffffffffffffe c0";
  std::erase(hex, ' ');
  auto b = Decode(hex);
  ASSERT_TRUE(b.ok()) << b.status();
  KvEventBatch want{.ts = 1};
  want.events.push_back(BlockStored{.block_hashes = {0xFFFFFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFF80ULL,
                                                     0xFFFFFFFFFFFF8000ULL, 0x8000000000000000ULL},
                                    .parent_block_hash = 0xFFFFFFFFFFFFFFFBULL,
                                    .token_ids = Tokens(0, 64),
                                    .block_size = 16});
  want.events.push_back(
      BlockRemoved{.block_hashes = {0x8000000000000000ULL, 0xFFFFFFFFFFFFFFFEULL}});
  EXPECT_EQ(*b, want);
  // The unsigned spelling (uint64 on the wire) of the same batch decodes alike.
  auto unsigned_form = DecodeKvEventBatch(EncodeKvEventBatch(want, KvEventEncoding::kArray));
  ASSERT_TRUE(unsigned_form.ok()) << unsigned_form.status();
  EXPECT_EQ(*unsigned_form, *b);
}

TEST(KvEventsDecode, ShortBytesHashIsZeroExtended) {
  const uint8_t three[] = {0x01, 0x02, 0x03};
  EXPECT_EQ(EngineHashFromBytes(three), 0x010203u);
  const uint8_t ten[] = {0xaa, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(EngineHashFromBytes(ten), 0x0102030405060708u);
}

// Our encoder writes what msgspec writes: the goldens round-trip byte for byte.
TEST(KvEventsEncode, ReproducesVllmBytes) {
  for (auto [hex, encoding] : {std::pair{kArrayBatch, KvEventEncoding::kArray},
                               std::pair{kMapBatch, KvEventEncoding::kMap}}) {
    const auto bytes = Hex(hex);
    auto b = DecodeKvEventBatch(bytes);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(EncodeKvEventBatch(*b, encoding), bytes);
  }
}

TEST(KvEventsEncode, EveryEncodingRoundTrips) {
  KvEventBatch batch;
  batch.ts = 0.5;  // fits a float32; msgspec still writes float64
  batch.dp_rank = 7;
  batch.events.push_back(BlockStored{.block_hashes = {kBig, 1, 300, 70000, 5'000'000'000},
                                     .parent_block_hash = 99,
                                     .token_ids = Tokens(4'000'000'000u, 80),
                                     .block_size = 16,
                                     .medium = "GPU",
                                     .lora_name = std::string(40, 'x'),
                                     .extra_keys = std::vector<BlockExtraKeys>{
                                         std::vector<ExtraKey>{{.str = "salt"}},
                                         std::nullopt,
                                         std::vector<ExtraKey>{{.kind = ExtraKey::Kind::kInt, .num = -3},
                                                               {.str = std::string(300, 'm')}},
                                         std::vector<ExtraKey>{},
                                         std::nullopt},
                                     .group_idx = 2});
  batch.events.push_back(BlockRemoved{.block_hashes = {kBig}, .medium = std::nullopt});
  batch.events.push_back(AllBlocksCleared{});
  for (auto encoding : {KvEventEncoding::kArray, KvEventEncoding::kMap, KvEventEncoding::kArrayBatch}) {
    for (auto hashes : {KvHashEncoding::kInt, KvHashEncoding::kBytes}) {
      const auto bytes = EncodeKvEventBatch(batch, encoding, hashes);
      auto back = DecodeKvEventBatch(bytes);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, batch);
    }
  }
  const auto bytes = EncodeKvEventBatch(batch, KvEventEncoding::kArray);
  EXPECT_EQ(bytes[1], 0xcb);  // float64 ts
}

// extra_keys: one entry per block, nil or an array of keys (python3 encodings of the values in
// the comments, built by a minimal msgpack writer).
TEST(KvEventsDecode, ExtraKeysPerBlock) {
  const std::string head =
      "92019199ab426c6f636b53746f7265649101c0dc0010000102030405060708090a0b0c0d0e0f10c0a3475055c0";
  // extra_keys = [[["mm", 3], 7, "x"]]: a nested tuple is kept as a digest of its structure.
  auto b = Decode(head + "919392a26d6d0307a178");
  ASSERT_TRUE(b.ok()) << b.status();
  const auto& s = std::get<BlockStored>(b->events[0]);
  ASSERT_TRUE(s.extra_keys.has_value());
  ASSERT_EQ(s.extra_keys->size(), 1u);
  const std::vector<ExtraKey>& keys = *(*s.extra_keys)[0];
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].kind, ExtraKey::Kind::kOther);
  EXPECT_EQ(keys[1].kind, ExtraKey::Kind::kInt);
  EXPECT_EQ(keys[1].num, 7);
  EXPECT_EQ(keys[2].str, "x");
  EXPECT_EQ(DigestExtraKeys(keys), DigestExtraKeys(*(*std::get<BlockStored>(Decode(head + "919392a26d6d0307a178")->events[0]).extra_keys)[0]));
  // [[1.5]]: another structure, another digest.
  auto f = Decode(head + "9191cb3ff8000000000000");
  ASSERT_TRUE(f.ok()) << f.status();
  const ExtraKey& fk = (*(*std::get<BlockStored>(f->events[0]).extra_keys)[0])[0];
  EXPECT_EQ(fk.kind, ExtraKey::Kind::kOther);
  EXPECT_NE(fk.num, keys[0].num);
  // Shapes that are not one entry per block are errors naming the field.
  const std::pair<std::string, std::string> bad[] = {
      {head + "91a473616c74", "events[0].extra_keys[0]: expected an array of keys or nil"},  // ["salt"]
      {head + "9291a161c0", "events[0].extra_keys: 2 entries for 1 blocks"},                  // [["a"], None]
      {head + "05", "events[0].extra_keys: expected an array"},                               // 5
  };
  for (const auto& [hex, error] : bad) {
    auto e = Decode(hex);
    ASSERT_FALSE(e.ok()) << hex;
    EXPECT_NE(std::string(e.status().message()).find(error), std::string::npos) << e.status().message();
  }
}

struct BadCase {
  std::string_view hex;
  std::string_view error;
};

TEST(KvEventsDecode, ErrorsNameTheField) {
  // Each is python3-msgpack output for the commented value.
  const BadCase cases[] = {
      {"c0", "batch: expected an array or a map"},                                      // None
      {"91cb3ff0000000000000", "events: missing"},                                     // [1.0]
      {"92a178 90", "ts: expected a number"},                                          // ["x", []]
      {"9201c0", "events: expected an array"},                                         // [1, None]
      {"920191c0", "events[0]: expected an array or a map"},                           // [1,[None]]
      {"92019191 01", "events[0][0]: expected the event's tag"},                       // [1,[[1]]]
      {"92019181a17801", "events[0].type: missing"},                                   // [1,[{"x":1}]]
      // [1, [["BlockStored", [1], None, 5, 16]]]
      {"92019195ab426c6f636b53746f7265649101c00510", "events[0].token_ids: expected an array"},
      // [1, [["BlockStored", ["x"], None, [], 16]]]
      {"92019195ab426c6f636b53746f72656491a178c09010",
       "events[0].block_hashes[0]: expected an integer or bytes"},
      // [1, [["BlockStored", [1], 0.5, [], 16]]]
      {"92019195ab426c6f636b53746f7265649101cb3fe0000000000000 9010",
       "events[0].parent_block_hash: expected an integer or bytes"},
      // [1, [["BlockStored", [1], None, [2**32], 16]]]
      {"92019195ab426c6f636b53746f7265649101c091cf000000010000000010",
       "events[0].token_ids[0]: expected an integer in [0, 2^32)"},
      // [1, [["BlockStored", [1], None, []]]]
      {"92019194ab426c6f636b53746f7265649101c090", "events[0].block_size: missing"},
      // [1, [["BlockStored", [1], None, [], 0]]]
      {"92019195ab426c6f636b53746f7265649101c09000", "events[0].block_size: expected a positive"},
      // [1, [["BlockRemoved", [1], 5]]]
      {"92019193ac426c6f636b52656d6f766564910105", "events[0].medium: expected a string or nil"},
      // [1, [], "x"]
      {"930190a178", "data_parallel_rank: expected an integer or nil"},
  };
  for (const auto& c : cases) {
    std::string hex(c.hex);
    std::erase(hex, ' ');
    auto b = Decode(hex);
    ASSERT_FALSE(b.ok()) << c.hex;
    EXPECT_NE(std::string(b.status().message()).find(c.error), std::string::npos)
        << c.hex << " -> " << b.status().message();
  }
}

TEST(KvEventsDecode, MalformedMsgpackIsAnErrorNotACrash) {
  const std::vector<std::string_view> cases = {
      "",                  // nothing
      "93cb41da",          // truncated float
      "dc0020",            // array16 of 32, no elements
      "dd7fffffff",        // array32 claiming 2^31 elements
      "9201 90 00",        // trailing byte
      "c1",                // never-used type byte
      "9201 91 81 01 01",  // a map key that is not a string
  };
  for (auto c : cases) {
    std::string hex(c);
    std::erase(hex, ' ');
    auto b = Decode(hex);
    EXPECT_FALSE(b.ok()) << c;
  }
  // A million nested arrays: refused by depth, not by a stack overflow.
  std::vector<uint8_t> deep(1'000'000, 0x91);
  deep.push_back(0xc0);
  EXPECT_FALSE(DecodeKvEventBatch(deep).ok());
}

// A quick, seeded stand-in for the fuzzer in the normal suite: mutations of valid payloads
// (bit flips, byte overwrites, truncations, insertions) and plain random bytes must decode or
// fail cleanly. Whatever decodes must re-encode and decode to the same batch.
TEST(KvEventsDecode, SeededMutationsNeverCrash) {
  Rng rng(20261129);
  auto In = [&](uint64_t lo, uint64_t hi) { return lo + rng.Below(hi - lo + 1); };  // [lo, hi]
  std::vector<std::vector<uint8_t>> seeds;
  for (auto hex : {kArrayBatch, kArrayBatchOldest, kMapBatch, kMixedBatch}) seeds.push_back(Hex(hex));
  int decoded = 0;
  for (int iter = 0; iter < 600; ++iter) {
    std::vector<uint8_t> bytes;
    if (iter % 10 == 9) {
      bytes.resize(In(0, 64));
      for (auto& b : bytes) b = static_cast<uint8_t>(In(0, 255));
    } else {
      bytes = seeds[iter % seeds.size()];
      const int mutations = static_cast<int>(In(1, 4));
      for (int m = 0; m < mutations && !bytes.empty(); ++m) {
        const size_t at = In(0, bytes.size() - 1);
        switch (In(0, 3)) {
          case 0: bytes[at] ^= static_cast<uint8_t>(1u << In(0, 7)); break;
          case 1: bytes[at] = static_cast<uint8_t>(In(0, 255)); break;
          case 2: bytes.resize(at); break;
          default: bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at),
                                static_cast<uint8_t>(In(0, 255)));
        }
      }
    }
    auto b = DecodeKvEventBatch(bytes);
    if (!b.ok()) continue;
    ++decoded;
    auto again = DecodeKvEventBatch(EncodeKvEventBatch(*b, KvEventEncoding::kMap));
    ASSERT_TRUE(again.ok()) << again.status();
    b->unknown_events = 0;  // the encoder does not write events it does not know
    EXPECT_EQ(*again, *b);
  }
  EXPECT_GT(decoded, 0);  // some mutations (e.g. of token values) stay valid
}

}  // namespace
}  // namespace myriad::net
