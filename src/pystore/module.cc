// The Python module myriad_store: Myriad's KV cache store for engines written in Python, with
// the calls of Mooncake Store's MooncakeDistributedStore (docs/kvstore-python.md). Declarations
// only; the behaviour is PyStore's (pystore/store.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "pystore/store.h"

namespace py = pybind11;
using myriad::pystore::PyStore;
using myriad::pystore::ReplicateConfig;
using myriad::pystore::SetupArgs;

PYBIND11_MODULE(myriad_store, m) {
  m.doc() =
      "Myriad's KV cache store (master, storage nodes, TCP or same-host shared-memory data path) "
      "with Mooncake Store's Python calls. See docs/kvstore-python.md.";
  myriad::pystore::RegisterExceptions(m);
  m.def("last_error", &myriad::pystore::LastError,
        "The message of this thread's last failed call (the key, the node, the reason); '' "
        "after a success.");
  m.def("string_key", [](const std::string& key) { return myriad::pystore::StringKey(key); },
        py::arg("key"), "The 64-bit block key a str key is stored under.");

  py::class_<ReplicateConfig>(m, "ReplicateConfig")
      .def(py::init<>())
      .def_readwrite("replica_num", &ReplicateConfig::replica_num,
                     "Replicas on distinct fault domains, 1 to 4.")
      .def_readwrite("with_hard_pin", &ReplicateConfig::with_hard_pin, "Never evicted.")
      .def("__repr__", [](const ReplicateConfig& c) {
        return "ReplicateConfig(replica_num=" + std::to_string(c.replica_num) +
               ", with_hard_pin=" + (c.with_hard_pin ? "True" : "False") + ")";
      });

  const auto none = py::none();
  py::class_<PyStore>(m, "MyriadDistributedStore")
      .def(py::init<>())
      .def(
          "setup",
          [](PyStore& s, std::string master, std::string ns, int replicas, bool create_namespace,
             double timeout, std::string auth_token_file, bool shared_memory, bool raise_on_error) {
            return s.Setup(SetupArgs{std::move(master), std::move(ns), replicas, create_namespace,
                                     timeout, std::move(auth_token_file), shared_memory,
                                     raise_on_error});
          },
          py::arg("master_server_addr"), py::arg("namespace") = "default",
          py::arg("replicas") = 1, py::arg("create_namespace") = true, py::arg("timeout") = 10.0,
          py::arg("auth_token_file") = "", py::arg("shared_memory") = true,
          py::arg("raise_on_error") = false,
          "Connects to the master(s) and binds the store to `namespace` (a model version), "
          "creating it unless create_namespace=False. 0, or a negative code.")
      .def("close", &PyStore::Close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyStore& s, py::args) { s.Close(); })
      .def_property_readonly("namespace", &PyStore::ns)
      .def_property_readonly("master", &PyStore::master_url, "The master the next call goes to.")
      .def("put", &PyStore::Put, py::arg("key"), py::arg("value"), py::arg("config") = none,
           "Stores the bytes of `value` (any buffer, not copied) under `key`. 0, or a negative code.")
      .def("get", &PyStore::Get, py::arg("key"),
           "The object's bytes; raises ObjectNotFoundError (a KeyError) when missing, StoreError "
           "otherwise.")
      .def("put_batch", &PyStore::PutBatch, py::arg("keys"), py::arg("values"),
           py::arg("config") = none, "0 when every put succeeded, else the first failure's code.")
      .def("get_batch", &PyStore::GetBatch, py::arg("keys"),
           "The objects' bytes in order, b'' for a missing key; raises StoreError when a stored "
           "key could not be read.")
      .def("put_from", &PyStore::PutFrom, py::arg("key"), py::arg("buffer"),
           py::arg("size") = none, py::arg("config") = none)
      .def("get_into", &PyStore::GetInto, py::arg("key"), py::arg("buffer"),
           py::arg("size") = none, "Bytes written into `buffer`, or a negative code.")
      .def("batch_put_from", &PyStore::BatchPutFrom, py::arg("keys"), py::arg("buffers"),
           py::arg("sizes") = none, py::arg("config") = none,
           "One code per key. `buffers`: buffer objects, or registered addresses with `sizes`.")
      .def("batch_get_into", &PyStore::BatchGetInto, py::arg("keys"), py::arg("buffers"),
           py::arg("sizes") = none,
           "Bytes written per key, or a negative code (BUFFER_OVERFLOW -10: the buffer is too "
           "small).")
      .def("register_buffer", &PyStore::RegisterBuffer, py::arg("buffer"), py::arg("size") = none,
           "Lets batch_put_from / batch_get_into take addresses inside this range.")
      .def("unregister_buffer", &PyStore::UnregisterBuffer, py::arg("buffer"))
      .def("is_exist", &PyStore::IsExist, py::arg("key"), "1, 0, or -1 on an error.")
      .def("batch_is_exist", &PyStore::BatchIsExist, py::arg("keys"))
      .def("remove", &PyStore::Remove, py::arg("key"),
           "0; OBJECT_NOT_FOUND (-704); OBJECT_HAS_LEASE (-706) within 10 s of a read.")
      .def("batch_remove", &PyStore::BatchRemove, py::arg("keys"))
      .def("remove_all", &PyStore::RemoveAll,
           "Drops the namespace (every object in it) and creates it again, empty. 0, or a code.")
      .def("get_size", &PyStore::GetSize, py::arg("key"), "The object's size, or a negative code.");
  // Engine code written for Mooncake imports this name.
  m.attr("MooncakeDistributedStore") = m.attr("MyriadDistributedStore");
}
