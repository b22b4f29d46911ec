#!/usr/bin/env python3
"""Joins one run of bench/approx_routing.sh (KEEP=DIR) with its trace: where each later turn of a
conversation went, what the engine really had cached, how busy its engine was when it was
sent, and what the gateway estimated.

Usage: bench/approx_join.py DIR/trace.jsonl DIR/<router>_<rep>.run.jsonl [SPEED]

Per request, from loadgen's log (index = the trace's line): the engine (X-Myriad-Backend), the
TTFT and duration, the prompt tokens the engine reported cached (usage.prompt_tokens_details);
the conversation and turn from the trace (tenant, order of its requests); the requests in
flight on the same engine at its sending (sent earlier, not yet ended) and, of those, the ones
still before their first token. The gateway's estimate comes from the access log beside the run
log (<router>_<rep>.access.jsonl), matched by engine and prompt tokens in arrival order.
Times are emulated ms (real x SPEED, default 2), as the benchmark's table.
"""
import json
import re
import sys
from collections import defaultdict


def main():
    trace_path, run_path = sys.argv[1], sys.argv[2]
    speed = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    trace = [json.loads(line) for line in open(trace_path)]
    run = [json.loads(line) for line in open(run_path)]
    access_path = run_path.replace(".run.jsonl", ".access.jsonl")
    try:
        access = [json.loads(line) for line in open(access_path)]
    except OSError:
        access = []
    # Conversation and turn: a tenant's requests in trace order.
    turns = defaultdict(int)
    conv_of, turn_of = {}, {}
    for i, t in enumerate(trace):
        conv_of[i] = t["tenant"]
        turn_of[i] = turns[t["tenant"]]
        turns[t["tenant"]] += 1
    ok = [r for r in run if r["status"] == 200 and r["ttft_s"] >= 0]
    by_index = {r["index"]: r for r in ok}
    # The gateway's estimate, per (engine, prompt tokens) in arrival order.
    est = defaultdict(list)
    for a in access:
        m = re.search(r"est\. ttft ([0-9.]+) s", a.get("decision", ""))
        est[(a.get("backend"), a.get("input_tokens_est"))].append(float(m.group(1)) if m else None)
    for r in sorted(ok, key=lambda r: r["sent_s"]):
        q = est.get((r["backend"], r["prompt_tokens"]))
        r["est_ms"] = q.pop(0) * 1e3 * speed if q and q[0] is not None else None
    for r in ok:
        s = r["sent_s"]
        others = [o for o in ok if o is not r and o["backend"] == r["backend"] and o["sent_s"] <= s < o["sent_s"] + o["e2e_s"]]
        r["inflight"] = len(others)
        r["prefilling"] = sum(1 for o in others if s < o["sent_s"] + o["ttft_s"])
    last_backend = {}
    later = same = hit = same_hit = 0
    rows = []
    for i in sorted(by_index):
        r = by_index[i]
        c, k = conv_of[i], turn_of[i]
        prev = last_backend.get(c)
        if k > 0:
            later += 1
            same += prev == r["backend"]
            hit += r["cached_tokens"] > 0
            same_hit += prev == r["backend"] and r["cached_tokens"] > 0
        last_backend[c] = r["backend"]
        rows.append((r["ttft_s"] * 1e3 * speed, i, c, k, r, prev))
    print(f"{len(ok)} ok of {len(run)}; later turns {later}: {same} on the engine of the turn before "
          f"({same_hit} of those hit), {hit} found a cached prefix")
    busy = [x for x in rows if x[4]["inflight"] >= 2]
    free = [x for x in rows if x[4]["inflight"] < 2]
    def p50(xs):
        xs = sorted(x[0] for x in xs)
        return xs[len(xs) // 2] if xs else float("nan")
    print(f"sent while 2+ requests in flight on its engine: {len(busy)} (TTFT p50 {p50(busy):.0f} ms); "
          f"else {len(free)} (p50 {p50(free):.0f} ms)")
    errs = [(x[4]["est_ms"], x[0], x[4]["inflight"]) for x in rows if x[4].get("est_ms") is not None]
    for label, pick in (("inflight 0", lambda n: n == 0), ("inflight 1", lambda n: n == 1), ("inflight 2+", lambda n: n >= 2)):
        sel = [(e, t) for e, t, n in errs if pick(n)]
        if sel:
            ratio = sorted(t / max(e, 1e-3) for e, t in sel)
            print(f"  {label}: {len(sel)} requests, measured/estimated TTFT median {ratio[len(ratio) // 2]:.2f} "
                  f"(p10 {ratio[len(ratio) // 10]:.2f}, p90 {ratio[len(ratio) * 9 // 10]:.2f})")
    print("slowest 12: ttft_ms est_ms conv turn prompt cached engine prev_engine inflight prefilling")
    for t, i, c, k, r, prev in sorted(rows, key=lambda x: -x[0])[:12]:
        e = r.get("est_ms")
        print(f"  {t:7.0f} {e if e is None else round(e):>7} {c:4} {k:2} {r['prompt_tokens']:5} {r['cached_tokens']:5} "
              f"{r['backend']:4} {prev or '-':4} {r['inflight']} {r['prefilling']}")


if __name__ == "__main__":
    main()
