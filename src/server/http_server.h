// `ringlm serve`'s HTTP server (cpp-httplib, HTTP/1.1 keep-alive, one thread per connection from
// a pool): the OpenAI routes (/v1/chat/completions, /v1/completions, /v1/models), Anthropic's
// /v1/messages, /health, /metrics and the web chat page at /.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ringlm::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                           // 0: any free port (bind() returns it)
  std::string api_key;                       // "" = no authentication
  std::string model_name;                    // what /v1/models lists and responses name
  size_t max_body_bytes = size_t{16} << 20;  // larger bodies get 413
  int http_threads = 128;                    // connections served at once (streams hold one each)
};

class HttpServer {
 public:
  HttpServer(engine::Engine& engine, const ServerConfig& config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. Throws ringlm::Error if it cannot.
  int bind();
  // Serves until shutdown(); call after bind().
  void serve();
  // Graceful stop, safe from any thread: new requests get 503, the engine drains (in-flight
  // requests finish and their responses are written), then the listener closes.
  void shutdown();

 private:
  struct Handling;
  void routes();
  bool authorized(const httplib::Request& req) const;
  void generate(const httplib::Request& req, httplib::Response& res, int api);

  engine::Engine& engine_;
  ServerConfig config_;
  std::unique_ptr<httplib::Server> http_;
  ChatPrompter prompter_;
  Metrics metrics_;
  int64_t started_ = 0;
  std::atomic<bool> draining_{false};
  std::mutex inflight_mutex_;
  std::condition_variable inflight_cv_;
  int inflight_ = 0;  // generation requests not yet fully written
};

}  // namespace ringlm::server
