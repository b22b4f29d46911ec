#include "cli/kvstore_command.h"

#include "cli/stop_signals.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "kvstore/api_json.h"
#include "kvstore/master_server.h"
#include "kvstore_core/master.h"
#include "net/http.h"
#include "net/http_client.h"
#include "net/url_path.h"

namespace myriad::cli {

namespace {

void AddMasterUrl(CLI::App* app, std::string* url, double* timeout_s) {
  app->add_option("--master", *url,
                  "The master's URL, http://HOST:PORT; or several masters of one group, "
                  "comma-separated (the leader is found and followed)")
      ->required();
  app->add_option("--timeout", *timeout_s, "Seconds to wait for each answer")
      ->capture_default_str();
}

// Prints the answer; a JSON body is pretty-printed, an error's message goes to stderr.
int Report(const char* what, const absl::StatusOr<net::HttpResponse>& r) {
  if (!r.ok()) {
    std::fprintf(stderr, "myriad kvstore %s: %s\n", what, std::string(r.status().message()).c_str());
    return 1;
  }
  nlohmann::json body = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status >= 400) {
    std::string message = r->body;
    if (!body.is_discarded() && body.contains("error") && body["error"].is_object() &&
        body["error"].contains("message") && body["error"]["message"].is_string()) {
      message = body["error"]["message"].get<std::string>();
    }
    std::fprintf(stderr, "myriad kvstore %s: the master answered %d: %s\n", what, r->status,
                 message.c_str());
    return 1;
  }
  if (body.is_discarded()) {
    std::printf("%s\n", r->body.c_str());
  } else {
    std::printf("%s\n", body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return 0;
}

// nullptr (after printing why) for a bad --master or --auth-token-file: both bad input.
std::unique_ptr<LeaderFollowingHttp> Connect(const char* what, const std::string& url,
                                             double timeout_s, const std::string& token_file) {
  std::optional<std::string> token = LoadAuthTokenFor(what, token_file);
  if (!token) return nullptr;
  absl::StatusOr<std::unique_ptr<LeaderFollowingHttp>> client =
      LeaderFollowingHttp::Create(url, SecondsToNanos(timeout_s), *std::move(token));
  if (!client.ok()) {
    std::fprintf(stderr, "myriad kvstore %s: --master: %s\n", what,
                 std::string(client.status().message()).c_str());
    return nullptr;
  }
  return *std::move(client);
}

}  // namespace

KvstoreCommand::KvstoreCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("kvstore", "The shared KV cache store: master, storage nodes, repair agent and client");
  cmd_->require_subcommand(1);

  master_ = cmd_->add_subcommand("master", "Serve the metadata API until SIGINT or SIGTERM");
  master_->add_option("--listen", listen_, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  master_->add_option("--threads", threads_, "I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  master_->add_option("--max-body", max_body_bytes_, "Largest request body accepted, bytes")
      ->capture_default_str();
  AddAuthTokenFile(master_, &auth_token_file_);
  ha_.Add(master_);
  load_.Add(cmd_);

  stat_ = cmd_->add_subcommand("stat", "Print the master's statistics");
  AddMasterUrl(stat_, &url_, &timeout_s_);
  AddAuthTokenFile(stat_, &auth_token_file_);

  put_ = cmd_->add_subcommand("put", "Put one object: start + end (metadata only), or its bytes with --file");
  AddMasterUrl(put_, &url_, &timeout_s_);
  AddAuthTokenFile(put_, &auth_token_file_);
  put_->add_option("--namespace", namespace_, "Namespace (model version + KV format)")->required();
  put_->add_option("--keys", keys_, "Block keys of the object, in chain order (decimal or 0x hex)")
      ->delimiter(',')
      ->required();
  put_->add_option("--size", size_, "Bytes of the object, per replica (or --file); at most 4 GiB");
  put_->add_option("--replicas", replicas_, "Replicas, on distinct fault domains")
      ->capture_default_str();
  put_->add_flag("--pinned", pinned_, "Never evict the object");
  put_->add_flag("--create-namespace", create_namespace_,
                 "Create the namespace first (an existing one is fine)");

  get_ = cmd_->add_subcommand("get", "Look keys up (replicas, lease), or read an object with --out");
  AddMasterUrl(get_, &url_, &timeout_s_);
  AddAuthTokenFile(get_, &auth_token_file_);
  get_->add_option("--namespace", namespace_, "Namespace")->required();
  get_->add_option("--keys", keys_, "Block keys (decimal or 0x hex)")->delimiter(',')->required();

  namespace_cmd_ = cmd_->add_subcommand(
      "namespace", "Create or drop a namespace (one per model version and KV format)");
  AddMasterUrl(namespace_cmd_, &url_, &timeout_s_);
  AddAuthTokenFile(namespace_cmd_, &auth_token_file_);
  const std::string name_rule = fmt::format(
      "1 to {} bytes of printable ASCII, no spaces", kvstore::kMaxNamespaceNameBytes);
  auto* create = namespace_cmd_->add_option("--create", create_ns_, "Create this namespace (" + name_rule + ")");
  auto* drop = namespace_cmd_->add_option(
      "--drop", drop_ns_,
      "Drop this namespace: its objects turn invisible at once and the nodes free their bytes "
      "once the last read lease in it has expired");
  create->excludes(drop);
  AddStorageCommands();
}

int KvstoreCommand::Run() {
  if (master_->parsed()) return RunMaster();
  if (stat_->parsed()) return RunStat();
  if (put_->parsed()) return file_.empty() ? RunPut() : RunPutData();
  if (get_->parsed()) return out_.empty() ? RunGet() : RunGetData();
  if (namespace_cmd_->parsed()) return RunNamespace();
  if (load_.selected()) return load_.Run();
  if (node_->parsed()) return RunNode();
  if (repair_->parsed()) return RunRepair();
  return 2;
}

int KvstoreCommand::RunMaster() {
  absl::StatusOr<net::HostPort> listen = net::ParseHostPort(listen_);
  if (!listen.ok()) {
    std::fprintf(stderr, "myriad kvstore master: --listen %s\n",
                 std::string(listen.status().message()).c_str());
    return 2;
  }
  kvstore::MasterServerOptions options;
  options.http.address = listen->host;
  options.http.port = listen->port;
  options.http.threads = threads_;
  options.http.max_body_bytes = max_body_bytes_;
  std::optional<std::string> token = LoadAuthTokenFor("master", auth_token_file_, /*server=*/true);
  if (!token) return 2;
  options.auth_token = *std::move(token);
  if (ha_.enabled()) return RunHaMaster(ha_, std::move(options));
  StopSignals signals;  // before any thread starts

  kvstore::MasterServer server(std::move(options));
  if (absl::Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "myriad kvstore master: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  const std::string host = listen->host.find(':') != std::string::npos
                               ? fmt::format("[{}]", listen->host)
                               : listen->host;
  std::printf("myriad kvstore master: listening on http://%s:%u\n", host.c_str(),
              static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  const int signal = signals.Wait();
  std::printf("myriad kvstore master: %s, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  server.Stop();
  return 0;
}

int KvstoreCommand::RunStat() {
  auto client = Connect("stat", url_, timeout_s_, auth_token_file_);
  if (!client) return 2;
  return Report("stat", client->Get("/v1/stats"));
}

int KvstoreCommand::RunPut() {
  if (size_ == 0) {
    std::fprintf(stderr, "myriad kvstore put: --size (or --file) is required\n");
    return 2;
  }
  if (size_ > kvstore::kMaxObjectBytes) {
    std::fprintf(stderr, "myriad kvstore put: --size %llu exceeds the maximum object size %llu (4 GiB)\n",
                 static_cast<unsigned long long>(size_),
                 static_cast<unsigned long long>(kvstore::kMaxObjectBytes));
    return 2;
  }
  auto client = Connect("put", url_, timeout_s_, auth_token_file_);
  if (!client) return 2;
  if (create_namespace_) {
    absl::StatusOr<net::HttpResponse> r =
        client->Post("/v1/namespaces", nlohmann::json{{"name", namespace_}}.dump());
    if (!r.ok() || (r->status != 201 && r->status != 409)) return Report("put", r);
  }
  const nlohmann::json start = {{"namespace", namespace_},
                                {"keys", keys_},
                                {"size", size_},
                                {"replicas", replicas_},
                                {"pinned", pinned_}};
  absl::StatusOr<net::HttpResponse> started = client->Post("/v1/put/start", start.dump());
  if (!started.ok() || started->status != 200) return Report("put", started);
  absl::StatusOr<net::HttpResponse> ended = client->Post(
      "/v1/put/end", nlohmann::json{{"namespace", namespace_}, {"object", keys_.back()}}.dump());
  if (!ended.ok() || ended->status != 200) return Report("put", ended);
  // The replicas are what the writer needs; the end's answer adds nothing to them.
  return Report("put", started);
}

int KvstoreCommand::RunGet() {
  auto client = Connect("get", url_, timeout_s_, auth_token_file_);
  if (!client) return 2;
  return Report("get", client->Post("/v1/get", nlohmann::json{{"namespace", namespace_},
                                                              {"keys", keys_}}
                                                   .dump()));
}

int KvstoreCommand::RunNamespace() {
  const bool create = namespace_cmd_->count("--create") > 0;
  if (!create && namespace_cmd_->count("--drop") == 0) {
    std::fprintf(stderr, "myriad kvstore namespace: give --create NAME or --drop NAME\n");
    return 2;
  }
  const std::string& name = create ? create_ns_ : drop_ns_;
  if (absl::Status st = kvstore::KvMaster::ValidateNamespaceName(name); !st.ok()) {
    std::fprintf(stderr, "myriad kvstore namespace: %s: %s\n", create ? "--create" : "--drop",
                 std::string(st.message()).c_str());
    return 2;
  }
  auto client = Connect("namespace", url_, timeout_s_, auth_token_file_);
  if (!client) return 2;
  if (create) {
    return Report("namespace", client->Post("/v1/namespaces", nlohmann::json{{"name", name}}.dump()));
  }
  return Report("namespace", client->Delete("/v1/namespaces/" + net::PathSegment(name)));
}

}  // namespace myriad::cli
