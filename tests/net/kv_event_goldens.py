#!/usr/bin/python3
"""Generates the golden msgpack payloads of tests/net/kv_events_test.cc with python3-msgpack,
independently of Myriad's encoder. The shapes follow vLLM's vllm/distributed/kv_events.py:
msgspec Structs with omit_defaults=True and tag=True; array_like=True in older releases
(a tagged struct is [tag, field...] with trailing default-valued fields omitted), maps tagged
by a "type" key in newer ones. Run: /usr/bin/python3 tests/net/kv_event_goldens.py"""
import hashlib
import msgpack

BIG = 0xFFEEDDCCBBAA9988  # above INT64_MAX: msgpack uint64 (0xcf)
TOKENS = list(range(100, 132))  # two blocks of 16
TS = 1750000000.25

def dump(name, obj):
    b = msgpack.packb(obj, use_bin_type=True)
    print(f"// {name}: {len(b)} bytes")
    print(f'constexpr std::string_view k{name} = "{b.hex()}";')

# Older vLLM: everything positional. BlockStored fields up to lora_name; extra_keys and
# group_idx are default-valued, hence omitted. data_parallel_rank present.
dump("ArrayBatch", [TS, [
    ["BlockStored", [BIG, 42], None, TOKENS, 16, None, "GPU", None],
    ["BlockRemoved", [BIG], "GPU"],
    ["AllBlocksCleared"],
], 3])

# The oldest shape: no data_parallel_rank, BlockStored without lora_id/medium/lora_name,
# BlockRemoved without medium.
dump("ArrayBatchOldest", [TS, [
    ["BlockStored", [7], 5, TOKENS[:16], 16],
    ["BlockRemoved", [7]],
]])

# Current vLLM: batch and events are maps, events tagged by "type"; fields without defaults
# always present (None -> nil), default-valued ones omitted.
dump("MapBatch", {"ts": TS, "events": [
    {"type": "BlockStored", "block_hashes": [BIG, 42], "parent_block_hash": 9,
     "token_ids": TOKENS, "block_size": 16, "lora_id": None, "medium": "CPU",
     "lora_name": "adapter-a", "group_idx": 1},
    {"type": "BlockRemoved", "block_hashes": [42], "medium": "CPU", "group_idx": 1},
    {"type": "AllBlocksCleared"},
], "data_parallel_rank": 2})

# Mixed: array batch, map events; raw-bytes hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0:
# the 32-byte sha256 digest); unknown fields and an unknown event tag in both forms.
d1 = hashlib.sha256(b"block-1").digest()
d2 = hashlib.sha256(b"block-2").digest()
print(f"// d1 last 8 bytes BE = {int.from_bytes(d1[-8:], 'big'):#x}")
print(f"// d2 last 8 bytes BE = {int.from_bytes(d2[-8:], 'big'):#x}")
dump("MixedBatch", [TS, [
    {"type": "BlockStored", "block_hashes": [d2], "parent_block_hash": d1,
     "token_ids": TOKENS[:16], "block_size": 16, "lora_id": None, "medium": "GPU",
     "lora_name": None, "future_field": [1, {"x": 2}]},
    {"type": "BlockPinned", "block_hashes": [d2]},
    ["BlockEvicted", 1, 2, 3],
    ["BlockRemoved", [d1, 77], "GPU", 0, "future", [1, 2]],
], None, "trailing-unknown"])
