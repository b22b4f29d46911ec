#!/usr/bin/env python3
"""The real-world player of an incident script (docs/controller.md, "The incident script").

`myriad incident --plan SCRIPT` validates the script and resolves it; this plays it against
`myriad up --control` with emulated engines: the load from `myriad loadgen`, each fault at its
time through the emulator's fault API (POST /admin/fault). It prints the controller's timeline
as `myriad incident` prints the simulator's (one JSON line per action, t_s from the start of
the load; the admission's record_answer, before the load, left out), then per fault the time
from the fault to its drain (detected) and to its readmit or cordon (handled), and loadgen's
counts. The timeline lines come from the controller's own log.

Usage: bench/control_incident.py [SCRIPT] [path/to/myriad]
  (default scenarios/incidents/four_faults.yaml, build/release/myriad); KEEP=1 keeps the work
  folder (up.out, load.json).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINAL = ("readmit", "cordon")


def now():
    # The controller's t_s: CLOCK_MONOTONIC, shared by every process on the machine.
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def post(url, body, timeout):
    try:
        urllib.request.urlopen(urllib.request.Request(url, data=body.encode()), timeout=timeout).read()
    except Exception:
        pass  # a crash cuts the connection before it answers; a hung engine never answers


def actions(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                j = json.loads(line)
                if "action" in j and "target" in j:
                    out.append(j)
    return out


def main():
    script = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "scenarios/incidents/four_faults.yaml")
    binary = os.path.realpath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build/release/myriad"))
    plan_run = subprocess.run([binary, "incident", "--plan", script], capture_output=True, text=True)
    if plan_run.returncode != 0:
        sys.stderr.write(plan_run.stderr)
        return plan_run.returncode
    plan = json.loads(plan_run.stdout)
    work = tempfile.mkdtemp(prefix="myriad_incident_")
    up = None
    try:
        up_out = os.path.join(work, "up.out")
        cmd = [binary, "up", "--engines", str(plan["engines"]), "--dp", str(plan["dp"]), "--port", "0",
               "--speed", str(plan["speed"]), "--control"]
        if plan["control_config"]:
            cmd += ["--control-config", plan["control_config"]]
        up = subprocess.Popen(cmd, stdout=open(up_out, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        text = ""
        while "controller on" not in text:
            if time.time() > deadline or up.poll() is not None:
                sys.stderr.write(text)
                return 1
            time.sleep(0.1)
            text = open(up_out).read()
        urls = dict(re.findall(r"^\s+(engine-\d+)\s+\S+\s+(http://[0-9.:]+)", text, re.M))
        gateway = re.search(r"gateway on (http://[0-9.:]+)", text).group(1)
        # Every engine admitted (its answer recorded) before the load starts.
        deadline = time.time() + 30
        while {a["target"] for a in actions(up_out) if a["action"] == "record_answer"} != set(urls):
            if time.time() > deadline:
                sys.stderr.write(open(up_out).read())
                return 1
            time.sleep(0.1)

        load = plan["load"]
        load_json = os.path.join(work, "load.json")
        t0 = now()
        loadgen = subprocess.Popen(
            [binary, "loadgen", "--url", gateway, "--duration", f"{plan['duration_s']}s", "--rate", str(load["rate"]),
             "-c", str(load["concurrency"]), "--max-tokens", str(load["max_tokens"]),
             "--prompt-words", str(load["prompt_tokens"]), "--seed", str(load["seed"]), "--timeout", "120s",
             "--json"], stdout=open(load_json, "w"), stderr=subprocess.STDOUT)
        sent = []  # (fault, engine, monotonic time sent)
        for f in sorted(plan["faults"], key=lambda f: f["at_s"]):
            time.sleep(max(0.0, t0 + f["at_s"] - now()))
            body = {"kind": f["fault"]}
            if f["fault"] == "slow":
                body.update(factor=f["factor"], rank=f["rank"])
            at = now()
            post(urls[f["engine"]] + "/admin/fault", json.dumps(body), timeout=1)
            sent.append((f, at))
            if f["fault"] == "hang":
                # A request held in the hung engine: the gateway may stop sending it work (its
                # health checks) before the controller sees requests in flight without progress.
                threading.Thread(target=post, daemon=True,
                                 args=(urls[f["engine"]] + "/v1/completions",
                                       '{"prompt":"stuck","max_tokens":4}', 600)).start()
        loadgen.wait()
        # After the load: until every faulted engine is handled, or the script's drain is over.
        deadline = now() + plan["drain_s"]
        faulted = {f["engine"] for f, _ in sent}
        while now() < deadline:
            done = {a["target"] for a in actions(up_out) if a["action"] in FINAL and a["t_s"] >= t0}
            if faulted <= done:
                break
            time.sleep(0.2)
        up.terminate()
        up.wait(timeout=30)
        up = None

        lines = [a for a in actions(up_out) if a["action"] != "record_answer"]
        for a in lines:
            out = {"t_s": round(a["t_s"] - t0, 3), "action": a["action"], "target": a["target"],
                   "reason": a.get("reason", "")}
            if "probe" in a:
                out["probe"] = a["probe"]
            print(json.dumps(out))
        limits = {"crash": 10, "hang": 45, "slow": 120, "wrong_answer": None}
        for f, at in sent:
            mine = [a for a in lines if a["target"] == f["engine"] and a["t_s"] >= at]
            drain = next((a for a in mine if a["action"] == "drain"), None)
            end = next((a for a in mine if a["action"] in FINAL), None)
            d = f"{drain['t_s'] - at:.2f} s ({drain['reason']})" if drain else "never"
            e = f"{end['action']} {end['t_s'] - at:.2f} s" if end else "never"
            limit = limits[f["fault"]]
            target = f"<= {limit} s" if limit else "within one probe period"
            print(f"# {f['fault']:12} {f['engine']}: detected {d}, handled {e} (target {target})", file=sys.stderr)
        text = open(load_json).read()
        report = json.loads(text[text.index("{"):])
        print("# loadgen: " + json.dumps({"requests": report["requests"], "errors": report.get("errors", {})}),
              file=sys.stderr)
        return 0
    finally:
        if up is not None:
            up.kill()
            up.wait()
        if os.environ.get("KEEP"):
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
