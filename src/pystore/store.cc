#include "pystore/store.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cstring>
#include <span>
#include <string_view>

#include "kvstore/auth.h"
#include "kvstore_core/types.h"

namespace myriad::pystore {

namespace {

thread_local std::string t_last_error;
PyObject* g_store_error = nullptr;  // module-lifetime references, never released
PyObject* g_not_found = nullptr;

[[noreturn]] void Raise(PyObject* type, int code, const std::string& message) {
  py::object e = py::handle(type)(py::str(message));
  e.attr("code") = code;
  e.attr("code_name") = std::string(CodeName(code));
  PyErr_SetObject(type, e.ptr());
  throw py::error_already_set();
}

std::string Repr(py::handle h) { return py::repr(h).cast<std::string>(); }

// str and bytes keys are hashed (Mooncake's keys are strings); integers are block keys.
BlockKey ToBlockKey(py::handle key) {
  if (PyUnicode_Check(key.ptr())) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(key.ptr(), &n);
    if (s == nullptr) throw py::error_already_set();
    return StringKey(std::string_view(s, static_cast<size_t>(n)));
  }
  if (PyBytes_Check(key.ptr())) {
    return StringKey(std::string_view(PyBytes_AS_STRING(key.ptr()),
                                      static_cast<size_t>(PyBytes_GET_SIZE(key.ptr()))));
  }
  if (PyIndex_Check(key.ptr())) {
    py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(key.ptr()));
    if (!i) throw py::error_already_set();
    const unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error(fmt::format(
          "key {}: an integer key is a 64-bit block key, in [0, 2**64 - 1]", Repr(key)));
    }
    return static_cast<BlockKey>(v);
  }
  throw py::type_error(fmt::format("key {}: a key is a str, bytes or int (a block key), not {}",
                                   Repr(key), Repr(py::type::handle_of(key))));
}

// A list or tuple of the call's items (keys, values, buffers, sizes): a sequence of known length.
py::sequence Items(py::handle h, std::string_view what) {
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) {
    throw py::type_error(fmt::format("{} must be a list or tuple, not {}", what,
                                     Repr(py::type::handle_of(h))));
  }
  return py::reinterpret_borrow<py::sequence>(h);
}

std::vector<BlockKey> BlockKeys(const py::sequence& keys) {
  std::vector<BlockKey> out;
  out.reserve(keys.size());
  for (py::handle k : keys) out.push_back(ToBlockKey(k));
  return out;
}

void CheckObjectSize(size_t size, py::handle key, std::string_view what) {
  if (size == 0 || size > kvstore::kMaxObjectBytes) {
    throw py::value_error(fmt::format("{} {}: the value is {} bytes; an object is 1 byte to 4 GiB "
                                      "(4294967296 bytes)",
                                      what, Repr(key), size));
  }
}

}  // namespace

const std::string& LastError() { return t_last_error; }

void RegisterExceptions(py::module_& m) {
  g_store_error = PyErr_NewExceptionWithDoc(
      "myriad_store.StoreError",
      "A KV store call failed: .code is Mooncake's error code, .code_name its name; the "
      "message names the key, the node and the reason.",
      PyExc_RuntimeError, nullptr);
  if (g_store_error == nullptr) throw py::error_already_set();
  py::object bases = py::make_tuple(py::handle(g_store_error), py::handle(PyExc_KeyError));
  g_not_found = PyErr_NewExceptionWithDoc("myriad_store.ObjectNotFoundError",
                                          "get() of a key the store does not hold.",
                                          bases.ptr(), nullptr);
  if (g_not_found == nullptr) throw py::error_already_set();
  m.attr("StoreError") = py::handle(g_store_error);
  m.attr("ObjectNotFoundError") = py::handle(g_not_found);
}

// A caller's buffer, held from before the GIL is released until after it is taken again: the
// exporter stays alive and cannot resize it (a bytearray refuses while exported).
class PyStore::Pinned {
 public:
  Pinned(py::handle obj, bool writable, const std::string& what) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      py::error_already_set cause;
      throw py::type_error(fmt::format(
          "{}: {} is not a {}C-contiguous buffer ({}); pass a bytearray, a memoryview{} or a "
          "numpy array",
          what, Repr(py::type::handle_of(obj)), writable ? "writable " : "", cause.what(),
          writable ? "" : ", bytes"));
    }
  }
  ~Pinned() { PyBuffer_Release(&view_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  char* data() const { return static_cast<char*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

PyStore::~PyStore() {
  py::gil_scoped_release nogil;
  std::lock_guard lock(mu_);
  client_.reset();
}

template <class F>
void PyStore::Run(F&& f) {
  bool ready = false;
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(mu_);
    if (client_) {
      ready = true;
      f(*client_);
    }
  }
  if (!ready) throw std::runtime_error("myriad_store: the store is not set up (call setup()) or was closed");
}

int PyStore::Fail(int code, const std::string& message) {
  t_last_error = message;
  if (raise_) Raise(code == kObjectNotFound ? g_not_found : g_store_error, code, message);
  return code;
}

int PyStore::Answer(const absl::Status& status, Call call, std::string_view what, py::handle key) {
  if (status.ok()) {
    t_last_error.clear();
    return kOk;
  }
  return Fail(CodeOf(status, call),
              fmt::format("{}{} in namespace '{}': {}", what, key ? " " + Repr(key) : std::string(),
                          ns_, std::string(status.message())));
}

int PyStore::Setup(const SetupArgs& a) {
  if (a.master.empty()) throw py::value_error("setup: master_server_addr is empty");
  if (a.ns.empty() || a.ns.size() > kMaxNamespaceBytes) {
    throw py::value_error(fmt::format("setup: namespace is {} bytes; it must be 1 to {}",
                                      a.ns.size(), kMaxNamespaceBytes));
  }
  if (a.replicas < 1 || a.replicas > kvstore::kMaxReplicas) {
    throw py::value_error(fmt::format("setup: replicas {} is outside [1, {}]", a.replicas,
                                      kvstore::kMaxReplicas));
  }
  if (!(a.timeout_s > 0 && a.timeout_s <= kMaxTimeoutSeconds)) {
    throw py::value_error(fmt::format("setup: timeout {} s is outside (0, {}] s", a.timeout_s,
                                      kMaxTimeoutSeconds));
  }
  absl::StatusOr<std::string> token = kvstore::LoadAuthToken(a.auth_token_file);
  if (!token.ok()) throw py::value_error("setup: " + std::string(token.status().message()));
  kvstore::StoreClientOptions o;
  o.master_timeout = o.node_timeout = static_cast<Nanos>(a.timeout_s * kSecond);
  o.shared_memory = a.shared_memory;
  o.auth_token = *std::move(token);
  absl::StatusOr<std::unique_ptr<kvstore::StoreClient>> client;
  absl::Status st;
  {
    py::gil_scoped_release nogil;
    client = kvstore::StoreClient::Connect(a.master, o);
    if (client.ok()) {
      // Reaches the master and makes sure the namespace is there.
      if (a.create_namespace) {
        st = (*client)->master().CreateNamespace(a.ns);
        if (absl::IsFailedPrecondition(st) || absl::IsAlreadyExists(st)) st = absl::OkStatus();
      } else {
        const BlockKey probe = 0;
        st = (*client)->master().Exists(a.ns, std::span<const BlockKey>(&probe, 1)).status();
      }
    }
  }
  if (!client.ok()) {
    throw py::value_error(fmt::format("setup: master_server_addr '{}': {}", a.master,
                                      std::string(client.status().message())));
  }
  {
    py::gil_scoped_release nogil;
    std::lock_guard lock(mu_);
    client_.reset();
    if (st.ok()) client_ = *std::move(client);
  }
  ns_ = a.ns;
  replicas_ = a.replicas;
  raise_ = a.raise_on_error;
  if (st.ok()) {
    t_last_error.clear();
    return kOk;
  }
  return Fail(CodeOf(st, Call::kOther),
              fmt::format("setup: master {}, namespace '{}': {}", a.master, a.ns,
                          std::string(st.message())));
}

int PyStore::Close() {
  py::gil_scoped_release nogil;
  std::lock_guard lock(mu_);
  client_.reset();
  return kOk;
}

std::string PyStore::master_url() {
  std::string url;
  Run([&](kvstore::StoreClient& c) { url = c.master().current_url(); });
  return url;
}

int PyStore::Replicas(const std::optional<ReplicateConfig>& config) const {
  if (!config) return replicas_;
  if (config->replica_num < 1 || config->replica_num > kvstore::kMaxReplicas) {
    throw py::value_error(fmt::format("ReplicateConfig.replica_num {} is outside [1, {}]",
                                      config->replica_num, kvstore::kMaxReplicas));
  }
  return config->replica_num;
}

PyStore::Span PyStore::OneSpan(py::handle buffer, py::handle size, bool writable,
                               std::vector<std::unique_ptr<Pinned>>* pins, const std::string& what) {
  const bool sized = size && !size.is_none();
  size_t n = 0;
  if (sized) {
    const long long v = size.cast<long long>();
    if (v < 0) throw py::value_error(fmt::format("{}: size {} is negative", what, v));
    n = static_cast<size_t>(v);
  }
  if (PyIndex_Check(buffer.ptr()) && !PyObject_CheckBuffer(buffer.ptr())) {
    // Mooncake's form: an address, which must lie inside a range given to register_buffer.
    if (!sized) throw py::value_error(what + ": an address as a buffer needs its size");
    const uintptr_t ptr = buffer.cast<uintptr_t>();
    std::lock_guard lock(registered_mu_);
    auto it = registered_.upper_bound(ptr);
    if (it == registered_.begin() || ptr + n > std::prev(it)->first + std::prev(it)->second) {
      throw py::value_error(fmt::format(
          "{}: the {} bytes at address {:#x} are not inside a range given to register_buffer",
          what, n, ptr));
    }
    return {reinterpret_cast<char*>(ptr), n};
  }
  pins->push_back(std::make_unique<Pinned>(buffer, writable, what));
  const Pinned& p = *pins->back();
  if (sized && n > p.size()) {
    throw py::value_error(
        fmt::format("{}: size {} is larger than the buffer's {} bytes", what, n, p.size()));
  }
  return {p.data(), sized ? n : p.size()};
}

std::vector<PyStore::Span> PyStore::Spans(py::handle buffers, py::handle sizes, size_t count,
                                          bool writable, std::vector<std::unique_ptr<Pinned>>* pins) {
  py::sequence b = Items(buffers, "buffers");
  const bool sized = sizes && !sizes.is_none();
  py::sequence s = sized ? Items(sizes, "sizes") : py::sequence();
  if (b.size() != count || (sized && s.size() != count)) {
    throw py::value_error(fmt::format("{} keys but {} buffers{}", count, b.size(),
                                      sized ? fmt::format(" and {} sizes", s.size()) : ""));
  }
  std::vector<Span> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    out.push_back(OneSpan(b[i], sized ? py::handle(s[i]) : py::handle(), writable, pins,
                          fmt::format("buffers[{}]", i)));
  }
  return out;
}

int PyStore::Put(py::handle key, py::handle value, const std::optional<ReplicateConfig>& config) {
  return PutFrom(key, value, py::none(), config);
}

int PyStore::PutFrom(py::handle key, py::handle buffer, py::handle size,
                     const std::optional<ReplicateConfig>& config) {
  const BlockKey k = ToBlockKey(key);
  std::vector<std::unique_ptr<Pinned>> pins;
  const Span v = OneSpan(buffer, size, /*writable=*/false, &pins, "value");
  CheckObjectSize(v.size, key, "put");
  const int replicas = Replicas(config);
  const bool pinned = config && config->with_hard_pin;
  absl::Status st;
  Run([&](kvstore::StoreClient& c) {
    st = c.Put(ns_, std::span<const BlockKey>(&k, 1), std::string_view(v.data, v.size), replicas,
               pinned);
  });
  return Answer(st, Call::kPut, "put", key);
}

std::vector<int> PyStore::PutMany(py::handle keys, std::vector<BlockKey> blocks,
                                  std::vector<Span> values,
                                  const std::optional<ReplicateConfig>& config,
                                  std::string_view what) {
  py::sequence ks = py::reinterpret_borrow<py::sequence>(keys);
  for (size_t i = 0; i < values.size(); ++i) CheckObjectSize(values[i].size, ks[i], what);
  const int replicas = Replicas(config);
  const bool pinned = config && config->with_hard_pin;
  std::vector<absl::Status> statuses;
  Run([&](kvstore::StoreClient& c) {
    std::vector<kvstore::PutItem> items;
    items.reserve(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      items.push_back({std::span<const BlockKey>(&blocks[i], 1),
                       std::string_view(values[i].data, values[i].size)});
    }
    statuses = c.BatchPut(ns_, items, replicas, pinned);
  });
  std::vector<int> codes;
  std::string errors;
  for (size_t i = 0; i < statuses.size(); ++i) {
    codes.push_back(CodeOf(statuses[i], Call::kPut));
    if (statuses[i].ok()) continue;
    errors += fmt::format("{}{} {}: {}", errors.empty() ? "" : "; ", what, Repr(ks[i]),
                          std::string(statuses[i].message()));
  }
  t_last_error = errors;
  return codes;
}

int PyStore::PutBatch(py::handle keys, py::handle values, const std::optional<ReplicateConfig>& config) {
  py::sequence ks = Items(keys, "keys");
  std::vector<std::unique_ptr<Pinned>> pins;
  std::vector<Span> spans = Spans(values, py::none(), ks.size(), /*writable=*/false, &pins);
  const std::vector<int> codes = PutMany(ks, BlockKeys(ks), std::move(spans), config, "put_batch");
  for (int code : codes) {
    if (code != kOk) return Fail(code, t_last_error);
  }
  return kOk;
}

py::list PyStore::BatchPutFrom(py::handle keys, py::handle buffers, py::handle sizes,
                               const std::optional<ReplicateConfig>& config) {
  py::sequence ks = Items(keys, "keys");
  std::vector<std::unique_ptr<Pinned>> pins;
  std::vector<Span> spans = Spans(buffers, sizes, ks.size(), /*writable=*/false, &pins);
  const std::vector<int> codes = PutMany(ks, BlockKeys(ks), std::move(spans), config, "batch_put_from");
  for (int code : codes) {
    if (code != kOk) {
      Fail(code, t_last_error);
      break;
    }
  }
  return py::cast(codes);
}

py::bytes PyStore::Get(py::handle key) {
  const BlockKey k = ToBlockKey(key);
  absl::StatusOr<std::string> got;
  Run([&](kvstore::StoreClient& c) { got = c.Get(ns_, k); });
  if (!got.ok()) {
    const int code = CodeOf(got.status(), Call::kGet);
    t_last_error = fmt::format("get {} in namespace '{}': {}", Repr(key), ns_,
                               std::string(got.status().message()));
    Raise(code == kObjectNotFound ? g_not_found : g_store_error, code, t_last_error);
  }
  t_last_error.clear();
  return py::bytes(got->data(), got->size());
}

py::list PyStore::GetBatch(py::handle keys) {
  py::sequence ks = Items(keys, "keys");
  const std::vector<BlockKey> blocks = BlockKeys(ks);
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  absl::Status st;
  Run([&](kvstore::StoreClient& c) { st = c.BatchGet(ns_, blocks, &values, &statuses); });
  if (!st.ok()) {
    t_last_error = fmt::format("get_batch of {} keys in namespace '{}': {}", blocks.size(), ns_,
                               std::string(st.message()));
    Raise(g_store_error, CodeOf(st, Call::kGet), t_last_error);
  }
  // A missing key is a miss (b"", as Mooncake answers; no object is empty); a key that is
  // stored but could not be read is an error.
  std::string errors;
  int code = kOk;
  py::list out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!statuses[i].ok() && !absl::IsNotFound(statuses[i])) {
      if (code == kOk) code = CodeOf(statuses[i], Call::kGet);
      errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", Repr(ks[i]),
                            std::string(statuses[i].message()));
    }
    out.append(py::bytes(values[i].data(), values[i].size()));
  }
  t_last_error = errors;
  if (code != kOk) Raise(g_store_error, code, "get_batch: " + errors);
  return out;
}

py::list PyStore::BatchGetInto(py::handle keys, py::handle buffers, py::handle sizes) {
  py::sequence ks = Items(keys, "keys");
  const std::vector<BlockKey> blocks = BlockKeys(ks);
  std::vector<std::unique_ptr<Pinned>> pins;
  const std::vector<Span> dest = Spans(buffers, sizes, ks.size(), /*writable=*/true, &pins);
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  std::vector<int64_t> results(blocks.size(), 0);
  absl::Status st;
  Run([&](kvstore::StoreClient& c) {
    st = c.BatchGet(ns_, blocks, &values, &statuses);
    if (!st.ok()) return;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!statuses[i].ok()) continue;
      if (values[i].size() > dest[i].size) {
        results[i] = kBufferOverflow;
        continue;
      }
      std::memcpy(dest[i].data, values[i].data(), values[i].size());
      results[i] = static_cast<int64_t>(values[i].size());
    }
  });
  if (!st.ok()) {
    Fail(CodeOf(st, Call::kGet), fmt::format("batch_get_into of {} keys in namespace '{}': {}",
                                             blocks.size(), ns_, std::string(st.message())));
    return py::cast(std::vector<int64_t>(blocks.size(), CodeOf(st, Call::kGet)));
  }
  std::string errors;
  int first = kOk;
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::string why;
    if (!statuses[i].ok()) {
      results[i] = CodeOf(statuses[i], Call::kGet);
      why = std::string(statuses[i].message());
    } else if (results[i] == kBufferOverflow) {
      why = fmt::format("the object is {} bytes, the buffer {}", values[i].size(), dest[i].size);
    } else {
      continue;
    }
    if (first == kOk) first = static_cast<int>(results[i]);
    errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", Repr(ks[i]), why);
  }
  t_last_error = errors;
  if (first != kOk) Fail(first, "batch_get_into: " + errors);
  return py::cast(results);
}

int64_t PyStore::GetInto(py::handle key, py::handle buffer, py::handle size) {
  py::list r = BatchGetInto(py::make_tuple(key), py::make_tuple(buffer),
                            size && !size.is_none() ? py::handle(py::make_tuple(size)) : py::handle(py::none()));
  return r[0].cast<int64_t>();
}

int PyStore::RegisterBuffer(py::handle buffer, py::handle size) {
  uintptr_t ptr = 0;
  size_t n = 0;
  if (PyObject_CheckBuffer(buffer.ptr())) {
    Pinned p(buffer, /*writable=*/false, "register_buffer");
    ptr = reinterpret_cast<uintptr_t>(p.data());
    n = size && !size.is_none() ? size.cast<size_t>() : p.size();
    if (n > p.size()) throw py::value_error("register_buffer: size is larger than the buffer");
  } else {
    if (!size || size.is_none()) throw py::value_error("register_buffer: an address needs its size");
    ptr = buffer.cast<uintptr_t>();
    n = size.cast<size_t>();
  }
  if (ptr == 0 || n == 0) return Fail(kInvalidParams, "register_buffer: a null address or 0 bytes");
  std::lock_guard lock(registered_mu_);
  registered_[ptr] = std::max(registered_[ptr], n);
  return kOk;
}

int PyStore::UnregisterBuffer(py::handle buffer) {
  uintptr_t ptr = 0;
  if (PyObject_CheckBuffer(buffer.ptr())) {
    Pinned p(buffer, /*writable=*/false, "unregister_buffer");
    ptr = reinterpret_cast<uintptr_t>(p.data());
  } else {
    ptr = buffer.cast<uintptr_t>();
  }
  std::lock_guard lock(registered_mu_);
  if (registered_.erase(ptr) == 0) {
    return Fail(kInvalidParams, fmt::format("unregister_buffer: {:#x} was not registered", ptr));
  }
  return kOk;
}

py::list PyStore::BatchIsExist(py::handle keys) {
  py::sequence ks = Items(keys, "keys");
  const std::vector<BlockKey> blocks = BlockKeys(ks);
  absl::StatusOr<std::vector<bool>> found;
  Run([&](kvstore::StoreClient& c) { found = c.master().Exists(ns_, blocks); });
  if (!found.ok()) {
    Answer(found.status(), Call::kOther, "batch_is_exist", py::handle());
    return py::cast(std::vector<int>(blocks.size(), -1));  // Mooncake: -1 for an error
  }
  t_last_error.clear();
  std::vector<int> out;
  for (bool f : *found) out.push_back(f ? 1 : 0);
  return py::cast(out);
}

int PyStore::IsExist(py::handle key) { return BatchIsExist(py::make_tuple(key))[0].cast<int>(); }

py::list PyStore::BatchRemove(py::handle keys) {
  py::sequence ks = Items(keys, "keys");
  const std::vector<BlockKey> blocks = BlockKeys(ks);
  absl::StatusOr<std::vector<absl::Status>> removed;
  Run([&](kvstore::StoreClient& c) { removed = c.master().Remove(ns_, blocks); });
  if (!removed.ok()) {
    const int code = Answer(removed.status(), Call::kRemove, "batch_remove", py::handle());
    return py::cast(std::vector<int>(blocks.size(), code));
  }
  std::vector<int> out;
  std::string errors;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const absl::Status& s = (*removed)[i];
    out.push_back(CodeOf(s, Call::kRemove));
    if (!s.ok()) {
      errors += fmt::format("{}remove {}: {}", errors.empty() ? "" : "; ", Repr(ks[i]),
                            std::string(s.message()));
    }
  }
  t_last_error = errors;
  for (int code : out) {
    if (code != kOk) {
      Fail(code, errors);
      break;
    }
  }
  return py::cast(out);
}

int PyStore::Remove(py::handle key) { return BatchRemove(py::make_tuple(key))[0].cast<int>(); }

int PyStore::RemoveAll() {
  // Dropping the namespace frees every object in it at once (the nodes' bytes once the last
  // read lease has passed); the name is created again, empty, for the calls that follow.
  absl::Status st;
  Run([&](kvstore::StoreClient& c) {
    st = c.master().DropNamespace(ns_);
    if (st.ok() || absl::IsNotFound(st)) st = c.master().CreateNamespace(ns_);
  });
  return Answer(st, Call::kOther, "remove_all", py::handle());
}

int64_t PyStore::GetSize(py::handle key) {
  const BlockKey k = ToBlockKey(key);
  absl::StatusOr<std::vector<kvstore::Lookup>> found;
  Run([&](kvstore::StoreClient& c) { found = c.master().Get(ns_, std::span<const BlockKey>(&k, 1)); });
  if (!found.ok()) return Answer(found.status(), Call::kGet, "get_size", key);
  const kvstore::Lookup& l = (*found)[0];
  if (!l.found) {
    return Answer(absl::NotFoundError(l.pending ? "its put has not ended" : "no such key"),
                  Call::kGet, "get_size", key);
  }
  t_last_error.clear();
  return static_cast<int64_t>(l.size);
}

}  // namespace myriad::pystore
