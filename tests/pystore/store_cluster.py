"""A KV store on loopback for the Python tests: `myriad kvstore master` and `node` processes on
ephemeral ports, their logs in a temporary directory of the test's own, stopped at the end.

MYRIAD_BINARY names the myriad binary (ctest sets it, and PYTHONPATH to the module's folder).
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request


def myriad_binary():
    path = os.environ.get("MYRIAD_BINARY")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("MYRIAD_BINARY must name the built myriad binary (ctest sets it)")
    return path


class Cluster:
    """A master and `nodes` storage nodes, each node in a fault domain of its own."""

    def __init__(self, nodes=2, capacity=64 << 20, segment_bytes=8 << 20):
        self.dir = tempfile.mkdtemp(prefix="myriad_pystore_")
        self.procs = []
        self.master_proc = None
        try:
            self.master_proc, line = self._start(
                "master", ["kvstore", "master", "--listen", "127.0.0.1:0"], r"listening on (\S+)")
            self.url = line
            for i in range(nodes):
                self._start(f"node{i + 1}", [
                    "kvstore", "node", "--master", self.url, "--id", str(i + 1),
                    "--fault-domain", f"rack-{i + 1}", "--capacity", str(capacity),
                    "--segment-bytes", str(segment_bytes), "--listen", "127.0.0.1:0",
                    "--heartbeat", "0.2"], r"data path on (\S+)")
            self._wait_nodes(nodes)
        except BaseException:
            self.stop()
            raise

    def _start(self, name, args, pattern, timeout=20.0):
        log_path = os.path.join(self.dir, name + ".log")
        log = open(log_path, "wb")
        proc = subprocess.Popen([myriad_binary()] + args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(log_path, "r", errors="replace") as f:
                m = re.search(pattern, f.read())
            if m:
                return proc, m.group(1)
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        with open(log_path, "r", errors="replace") as f:
            raise RuntimeError(f"{name} did not start: {f.read()}")

    def _wait_nodes(self, n, timeout=20.0):
        deadline = time.monotonic() + timeout
        want = f'"nodes_alive":{n}'
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/v1/stats", timeout=2) as r:
                    if want in r.read().decode():
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{n} storage nodes did not register with {self.url}")

    def kill_master(self):
        self.master_proc.kill()
        self.master_proc.wait()

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
