#!/usr/bin/env python3
"""Per-request comparison of a `myriad twin --out DIR` run: where the two sides disagree.

    scripts/twin_diff.py DIR [--fail-at SECONDS]

Reads DIR/trace.jsonl, sim.jsonl, live.jsonl (and comparison.json for the failure window) and
prints: entry-engine agreement per 30 s of the trace, the prefix groups where disagreements
start, and the live-minus-simulated TTFT (median, p90) by prompt size, over the requests both
sides served. Less sensitive to a loaded machine than the headline table: it shows whether the
live side is uniformly slower (its own costs) or decides differently.
"""
import argparse
import json
import os
import statistics
import sys


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def quantile(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--fail-at", type=float, default=None, help="the failure's time (s); default: none")
    a = ap.parse_args()
    trace = read_jsonl(os.path.join(a.dir, "trace.jsonl"))
    sim = read_jsonl(os.path.join(a.dir, "sim.jsonl"))
    live = read_jsonl(os.path.join(a.dir, "live.jsonl"))
    comp = {}
    if os.path.exists(os.path.join(a.dir, "comparison.json")):
        with open(os.path.join(a.dir, "comparison.json")) as f:
            comp = json.load(f)
    t0 = trace[0]["timestamp"] if trace else 0
    window = None
    if a.fail_at is not None:
        ej = comp.get("eject_s", {})
        end = a.fail_at + max(ej.get("sim", 0) or 0, ej.get("live", 0) or 0, 0) + 1
        window = (a.fail_at, end)

    buckets = {}
    groups_first = {}
    ttft_by_size = {}
    ttft_agree, ttft_disagree = [], []
    decode_same = decode_n = 0
    for i, (r, s, l) in enumerate(zip(trace, sim, live)):
        at = (r["timestamp"] - t0) / 1000.0
        if window and window[0] <= at < window[1]:
            continue
        if not (s["served"] and l["served"]) or s["entry"] < 0 or l["entry"] < 0:
            continue
        same = s["entry"] == l["entry"]
        b = int(at // 30) * 30
        n, k = buckets.get(b, (0, 0))
        buckets[b] = (n + 1, k + (1 if same else 0))
        if not same:
            g = r["hash_ids"][0] if r["hash_ids"] else -1
            groups_first.setdefault(g, (i, at))
        if s["decode"] >= 0 and l["decode"] >= 0:
            decode_n += 1
            decode_same += s["decode"] == l["decode"]
        if s["ttft_s"] >= 0 and l["ttft_s"] >= 0:
            d = (l["ttft_s"] - s["ttft_s"]) * 1e3
            size = (s["prompt_tokens"] // 1000) * 1000
            ttft_by_size.setdefault(size, []).append(d)
            (ttft_agree if same else ttft_disagree).append(d)

    total = sum(n for n, _ in buckets.values())
    agreed = sum(k for _, k in buckets.values())
    print(f"same entry engine: {agreed}/{total} = {100.0 * agreed / max(total, 1):.1f}%"
          + (f" (failure window {window[0]:.0f}-{window[1]:.1f} s left out)" if window else ""))
    if decode_n:
        print(f"same decode engine: {decode_same}/{decode_n} = {100.0 * decode_same / decode_n:.1f}%")
    print("agreement per 30 s of the trace:")
    for b in sorted(buckets):
        n, k = buckets[b]
        print(f"  {b:5d}-{b + 30:<5d} s  {k:4d}/{n:<4d} {100.0 * k / n:5.1f}%")
    print(f"prefix groups where a disagreement starts: {len(groups_first)}")
    for g, (i, at) in sorted(groups_first.items(), key=lambda kv: kv[1][0])[:12]:
        print(f"  group {g}: first at request {i} ({at:.1f} s)")
    print("live - simulated TTFT (ms) by prompt tokens: median, p90, count")
    for size in sorted(ttft_by_size):
        xs = ttft_by_size[size]
        print(f"  {size:5d}-{size + 999:<5d}  {statistics.median(xs):+7.1f} {quantile(xs, 0.9):+7.1f}  {len(xs)}")
    alld = [d for xs in ttft_by_size.values() for d in xs]
    if alld:
        print(f"  all          {statistics.median(alld):+7.1f} {quantile(alld, 0.9):+7.1f}  {len(alld)}")
    if ttft_agree:
        print(f"  same engine  {statistics.median(ttft_agree):+7.1f}  ({len(ttft_agree)})")
    if ttft_disagree:
        print(f"  other engine {statistics.median(ttft_disagree):+7.1f}  ({len(ttft_disagree)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
