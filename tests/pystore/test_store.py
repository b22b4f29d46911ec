"""myriad_store as an engine written in Python calls it: a master and two storage nodes on
loopback (store_cluster.py), the calls of Mooncake's MooncakeDistributedStore, their errors."""
import ctypes
import socket
import threading
import time
import unittest

import myriad_store
from store_cluster import Cluster

SEGMENT = 1 << 20  # the nodes' segment: the largest object a node holds


def pattern(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


class StoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(nodes=2, capacity=32 << 20, segment_bytes=SEGMENT)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        # A namespace per test: model versions apart, tests apart.
        self.ns = "model/" + self._testMethodName
        self.store = myriad_store.MyriadDistributedStore()
        self.assertEqual(self.store.setup(self.cluster.url, namespace=self.ns, timeout=5.0), 0,
                         myriad_store.last_error())

    def tearDown(self):
        self.store.close()

    def test_put_get_round_trip_for_str_bytes_and_int_keys(self):
        s = self.store
        self.assertEqual(s.put("hello_key", b"Hello, Myriad!"), 0, myriad_store.last_error())
        self.assertEqual(s.get("hello_key"), b"Hello, Myriad!")
        self.assertEqual(s.put(b"raw", bytearray(b"from a bytearray")), 0)
        self.assertEqual(s.get(b"raw"), b"from a bytearray")
        block = 0x1234_5678_9ABC_DEF0  # a token block's key, as KV events carry it
        big = pattern(300_000, 7)
        self.assertEqual(s.put(block, memoryview(big)), 0, myriad_store.last_error())
        self.assertEqual(s.get(block), big)
        self.assertEqual(s.get_size(block), len(big))
        # A str key is stored under its block key.
        self.assertEqual(s.get(myriad_store.string_key("hello_key")), b"Hello, Myriad!")

    def test_put_of_a_stored_key_returns_object_already_exists(self):
        self.assertEqual(self.store.put("k", b"one"), 0)
        self.assertEqual(self.store.put("k", b"two"), -705)
        self.assertIn("'k'", myriad_store.last_error())
        self.assertIn(self.ns, myriad_store.last_error())
        self.assertEqual(self.store.get("k"), b"one")

    def test_missing_key(self):
        with self.assertRaises(myriad_store.ObjectNotFoundError) as e:
            self.store.get("absent")
        self.assertIsInstance(e.exception, KeyError)
        self.assertIsInstance(e.exception, myriad_store.StoreError)
        self.assertEqual(e.exception.code, -704)
        self.assertEqual(e.exception.code_name, "OBJECT_NOT_FOUND")
        self.assertIn("'absent'", str(e.exception))
        self.assertIn(self.ns, str(e.exception))
        self.assertEqual(self.store.get_size("absent"), -704)
        self.assertEqual(self.store.remove("absent"), -704)
        self.assertEqual(self.store.is_exist("absent"), 0)

    def test_put_batch_and_get_batch(self):
        keys = [f"blk{i}" for i in range(6)]
        values = [pattern(1000 + 500 * i, i) for i in range(6)]
        self.assertEqual(self.store.put_batch(keys, values), 0, myriad_store.last_error())
        got = self.store.get_batch(keys + ["not-there"])
        self.assertEqual(got[:6], values)
        self.assertEqual(got[6], b"")  # a miss, as Mooncake answers
        self.assertEqual(self.store.batch_is_exist(keys[:2] + ["not-there"]), [1, 1, 0])

    def test_batch_put_from_and_batch_get_into_use_the_callers_buffers(self):
        keys = ["a", "b", "c"]
        src = bytearray(pattern(3 * 100_000, 3))
        view = memoryview(src)
        parts = [view[0:100_000], view[100_000:200_000], view[200_000:300_000]]
        self.assertEqual(self.store.batch_put_from(keys, parts), [0, 0, 0], myriad_store.last_error())
        dest = bytearray(3 * 100_000)
        dview = memoryview(dest)
        out = [dview[0:100_000], dview[100_000:200_000], dview[200_000:300_000]]
        self.assertEqual(self.store.batch_get_into(keys, out), [100_000] * 3)
        self.assertEqual(dest, src)  # written in place
        # A buffer smaller than its object: BUFFER_OVERFLOW for that key alone.
        small = bytearray(10)
        self.assertEqual(self.store.batch_get_into(["a", "b"], [small, bytearray(100_000)]),
                         [-10, 100_000])
        self.assertIn("'a'", myriad_store.last_error())
        self.assertIn("100000 bytes", myriad_store.last_error())
        # A missing key: its code, the others still read.
        self.assertEqual(self.store.batch_get_into(["zz", "c"], [bytearray(8), bytearray(100_000)]),
                         [-704, 100_000])
        # get_into / put_from, one key.
        self.assertEqual(self.store.put_from("d", memoryview(src)[:5000]), 0)
        one = bytearray(6000)
        self.assertEqual(self.store.get_into("d", one), 5000)
        self.assertEqual(one[:5000], src[:5000])

    def test_addresses_must_lie_in_a_registered_buffer(self):
        buf = (ctypes.c_ubyte * 4096)()
        ptr = ctypes.addressof(buf)
        self.assertEqual(self.store.put("x", pattern(4000, 9)), 0)
        with self.assertRaisesRegex(ValueError, "register_buffer"):
            self.store.batch_get_into(["x"], [ptr], [4096])
        self.assertEqual(self.store.register_buffer(ptr, 4096), 0)
        self.assertEqual(self.store.batch_get_into(["x"], [ptr], [4096]), [4000])
        self.assertEqual(bytes(buf)[:4000], pattern(4000, 9))
        # Mooncake's put form: addresses and sizes.
        self.assertEqual(self.store.batch_put_from(["y"], [ptr + 16], [100]), [0])
        self.assertEqual(self.store.get("y"), pattern(4000, 9)[16:116])
        with self.assertRaisesRegex(ValueError, "register_buffer"):
            self.store.batch_get_into(["x"], [ptr + 1], [4096])  # runs past the range
        self.assertEqual(self.store.unregister_buffer(ptr), 0)
        self.assertEqual(self.store.unregister_buffer(ptr), -600)

    def test_remove_and_its_lease(self):
        s = self.store
        self.assertEqual(s.put("gone", b"bytes"), 0)
        self.assertEqual(s.is_exist("gone"), 1)
        self.assertEqual(s.remove("gone"), 0, myriad_store.last_error())
        self.assertEqual(s.is_exist("gone"), 0)
        # A read leases the object for 10 s: removing it then fails, as in Mooncake.
        self.assertEqual(s.put("read", b"bytes"), 0)
        self.assertEqual(s.get("read"), b"bytes")
        self.assertEqual(s.batch_remove(["read", "never"]), [-706, -704])
        self.assertIn("leased", myriad_store.last_error())

    def test_namespaces_keep_model_versions_apart(self):
        other = myriad_store.MyriadDistributedStore()
        self.assertEqual(other.setup(self.cluster.url, namespace=self.ns + "-canary"), 0)
        try:
            self.assertEqual(self.store.put("shared-prefix", b"v1 bytes"), 0)
            self.assertEqual(other.put("shared-prefix", b"v2 bytes"), 0)
            self.assertEqual(self.store.get("shared-prefix"), b"v1 bytes")
            self.assertEqual(other.get("shared-prefix"), b"v2 bytes")
            # Dropping one version frees it alone.
            self.assertEqual(other.remove_all(), 0, myriad_store.last_error())
            self.assertEqual(other.is_exist("shared-prefix"), 0)
            self.assertEqual(self.store.get("shared-prefix"), b"v1 bytes")
            self.assertEqual(other.put("shared-prefix", b"again"), 0)
        finally:
            other.close()
        # A namespace that does not exist, without create_namespace.
        lone = myriad_store.MyriadDistributedStore()
        self.assertEqual(lone.setup(self.cluster.url, namespace="never-created",
                                    create_namespace=False), -704)
        self.assertIn("never-created", myriad_store.last_error())

    def test_replicas_on_distinct_fault_domains(self):
        config = myriad_store.ReplicateConfig()
        config.replica_num = 2
        self.assertEqual(self.store.put("twice", b"x" * 1000, config), 0, myriad_store.last_error())
        config.replica_num = 3  # two fault domains only
        self.assertLess(self.store.put("thrice", b"x" * 1000, config), 0)
        self.assertIn("'thrice'", myriad_store.last_error())
        config.replica_num = 5
        with self.assertRaisesRegex(ValueError, r"replica_num 5 is outside \[1, 4\]"):
            self.store.put("five", b"x", config)

    def test_a_value_larger_than_a_node_holds_is_refused_naming_the_node(self):
        code = self.store.put("huge", bytes(2 * SEGMENT))
        self.assertLess(code, 0)
        error = myriad_store.last_error()
        self.assertIn("'huge'", error)
        # The node whose write failed and why, not only the retry's refused placement.
        self.assertRegex(error, r"writing replica 0 on node \d+ \(127\.0\.0\.1:\d+\): ")
        self.assertEqual(self.store.is_exist("huge"), 0)  # revoked, nothing half-written
        with self.assertRaisesRegex(ValueError, "1 byte to 4 GiB"):
            self.store.put("empty", b"")

    def test_bad_input_is_refused_before_any_call(self):
        s = self.store
        with self.assertRaisesRegex(TypeError, "a key is a str, bytes or int"):
            s.put(1.5, b"x")
        with self.assertRaisesRegex(ValueError, r"in \[0, 2\*\*64 - 1\]"):
            s.put(-1, b"x")
        with self.assertRaisesRegex(ValueError, "2 keys but 1 buffers"):
            s.batch_put_from(["a", "b"], [b"x"])
        with self.assertRaisesRegex(TypeError, "writable"):
            s.batch_get_into(["a"], [b"read-only bytes"])
        fresh = myriad_store.MyriadDistributedStore()
        with self.assertRaisesRegex(ValueError, r"replicas 9 is outside \[1, 4\]"):
            fresh.setup(self.cluster.url, replicas=9)
        with self.assertRaisesRegex(ValueError, "it must be 1 to 255"):
            fresh.setup(self.cluster.url, namespace="n" * 256)
        with self.assertRaisesRegex(ValueError, r"timeout 0 s is outside"):
            fresh.setup(self.cluster.url, timeout=0)
        with self.assertRaisesRegex(RuntimeError, "not set up"):
            fresh.get("a")

    def test_raise_on_error_turns_codes_into_exceptions(self):
        strict = myriad_store.MyriadDistributedStore()
        self.assertEqual(strict.setup(self.cluster.url, namespace=self.ns, raise_on_error=True), 0)
        with strict:
            self.assertEqual(strict.put("once", b"1"), 0)
            with self.assertRaises(myriad_store.StoreError) as e:
                strict.put("once", b"2")
            self.assertEqual(e.exception.code, -705)
            self.assertEqual(e.exception.code_name, "OBJECT_ALREADY_EXISTS")
        with self.assertRaisesRegex(RuntimeError, "closed"):
            strict.get("once")  # the with-block closed it

    def test_threads_share_one_store(self):
        errors = []

        def work(t):
            try:
                for i in range(20):
                    key = f"t{t}-{i}"
                    value = pattern(2000 + i, t)
                    if self.store.put(key, value) != 0:
                        errors.append(myriad_store.last_error())
                    elif self.store.get(key) != value:
                        errors.append(f"{key}: other bytes")
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_mooncake_name(self):
        self.assertIs(myriad_store.MooncakeDistributedStore, myriad_store.MyriadDistributedStore)


class DeadMasterTest(unittest.TestCase):
    def test_a_dead_master_gives_rpc_fail_naming_it(self):
        cluster = Cluster(nodes=1)
        try:
            store = myriad_store.MyriadDistributedStore()
            self.assertEqual(store.setup(cluster.url, namespace="m", timeout=2.0), 0)
            self.assertEqual(store.put("before", b"bytes"), 0)
            cluster.kill_master()
            start = time.monotonic()
            self.assertEqual(store.put("after", b"bytes"), -900)
            self.assertIn("'after'", myriad_store.last_error())
            with self.assertRaises(myriad_store.StoreError) as e:
                store.get("before")
            self.assertEqual(e.exception.code, -900)
            self.assertEqual(store.is_exist("before"), -1)
            self.assertLess(time.monotonic() - start, 10)  # refused, not hung
            again = myriad_store.MyriadDistributedStore()
            self.assertEqual(again.setup(cluster.url, timeout=2.0), -900)
            self.assertIn(cluster.url, myriad_store.last_error())
        finally:
            cluster.stop()

    def test_the_gil_is_released_while_a_call_waits(self):
        # A "master" that accepts and never answers: setup waits out its timeout, and another
        # Python thread runs meanwhile.
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        ticks = [0]
        done = threading.Event()

        def count():
            while not done.is_set():
                ticks[0] += 1
                time.sleep(0.01)

        counter = threading.Thread(target=count)
        counter.start()
        try:
            store = myriad_store.MyriadDistributedStore()
            start = time.monotonic()
            self.assertEqual(store.setup(url, timeout=1.0), -901)  # RPC_TIMEOUT
            self.assertGreaterEqual(time.monotonic() - start, 0.9)
        finally:
            done.set()
            counter.join()
            silent.close()
        self.assertGreater(ticks[0], 20)


if __name__ == "__main__":
    unittest.main()
