#pragma once
// PyStore: the object behind myriad_store.MyriadDistributedStore (docs/kvstore-python.md), the
// KV store client an engine written in Python calls, shaped like Mooncake Store's
// MooncakeDistributedStore. It holds one kvstore::StoreClient bound to one namespace (a model
// version) and turns Python keys, buffers and failures into block keys, spans and Mooncake's
// error codes; module.cc only declares it to Python.
//
// The GIL is released for every call that talks to the master or a node, so several Python
// threads may call one store at once: the calls are serialised on the client (one connection
// per node), other Python threads run meanwhile.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "core/time.h"
#include "kvstore/store_client.h"
#include "pystore/codes.h"

namespace myriad::pystore {

namespace py = pybind11;

// Mooncake's ReplicateConfig, the fields Myriad has: replicas on distinct fault domains, and
// a hard pin (never evicted).
struct ReplicateConfig {
  int replica_num = 1;
  bool with_hard_pin = false;
};

struct SetupArgs {
  std::string master;  // "http://host:port", or a group's masters comma-separated
  std::string ns = "default";
  int replicas = 1;
  bool create_namespace = true;
  double timeout_s = 10;
  std::string auth_token_file;  // empty: MYRIAD_KVSTORE_TOKEN, or none
  bool shared_memory = true;
  bool raise_on_error = false;
};

// Bounds of setup's arguments (docs/kvstore-python.md).
inline constexpr size_t kMaxNamespaceBytes = 255;
inline constexpr double kMaxTimeoutSeconds = 3600;

// The message of the last failure in this thread ("" after a success): the codes that
// Mooncake's calls return carry no text, this does (the key, the node, the reason).
const std::string& LastError();

// Sets up the module's exception types (StoreError, ObjectNotFoundError) on `m`.
void RegisterExceptions(py::module_& m);

class PyStore {
 public:
  ~PyStore();

  int Setup(const SetupArgs& args);
  int Close();

  int Put(py::handle key, py::handle value, const std::optional<ReplicateConfig>& config);
  py::bytes Get(py::handle key);
  int PutBatch(py::handle keys, py::handle values, const std::optional<ReplicateConfig>& config);
  py::list GetBatch(py::handle keys);

  // Zero-copy: `buffers` are buffer-protocol objects (bytearray, memoryview, numpy arrays), or
  // integer addresses inside a register_buffer range with `sizes` given (Mooncake's form).
  py::list BatchPutFrom(py::handle keys, py::handle buffers, py::handle sizes,
                        const std::optional<ReplicateConfig>& config);
  py::list BatchGetInto(py::handle keys, py::handle buffers, py::handle sizes);
  int PutFrom(py::handle key, py::handle buffer, py::handle size,
              const std::optional<ReplicateConfig>& config);
  int64_t GetInto(py::handle key, py::handle buffer, py::handle size);

  int RegisterBuffer(py::handle buffer, py::handle size);
  int UnregisterBuffer(py::handle buffer);

  int IsExist(py::handle key);
  py::list BatchIsExist(py::handle keys);
  int Remove(py::handle key);
  py::list BatchRemove(py::handle keys);
  int RemoveAll();
  int64_t GetSize(py::handle key);

  std::string ns() const { return ns_; }
  std::string master_url();

 private:
  struct Span {
    char* data = nullptr;
    size_t size = 0;
  };
  class Pinned;  // a Python buffer held (and so kept alive and unresized) during a call

  // Runs `f(client)` with the GIL released and the client locked; RuntimeError when the store
  // is not set up.
  template <class F>
  void Run(F&& f);
  // 0 for OK; else records the message ("WHAT KEY: reason") and returns the code, or raises
  // StoreError when the store was set up with raise_on_error.
  int Answer(const absl::Status& status, Call call, std::string_view what, py::handle key);
  int Fail(int code, const std::string& message);
  // The spans of `buffers` (objects or registered addresses with `sizes`), held in *pins.
  std::vector<Span> Spans(py::handle buffers, py::handle sizes, size_t count, bool writable,
                          std::vector<std::unique_ptr<Pinned>>* pins);
  // `what` names the argument in errors.
  Span OneSpan(py::handle buffer, py::handle size, bool writable,
               std::vector<std::unique_ptr<Pinned>>* pins, const std::string& what);
  int Replicas(const std::optional<ReplicateConfig>& config) const;
  std::vector<int> PutMany(py::handle keys, std::vector<BlockKey> blocks, std::vector<Span> values,
                           const std::optional<ReplicateConfig>& config, std::string_view what);

  std::mutex mu_;  // the client: one call at a time
  std::unique_ptr<kvstore::StoreClient> client_;
  std::string ns_;
  int replicas_ = 1;
  bool raise_ = false;
  std::mutex registered_mu_;
  std::map<uintptr_t, size_t> registered_;  // register_buffer's ranges: start -> bytes
};

}  // namespace myriad::pystore
