#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "core/error.h"
#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/openai_format.h"
#include "server/request_session.h"
#include "server/web_page.h"

namespace ringlm::server {

namespace {

using Clock = std::chrono::steady_clock;

// What the per-request log line says beyond method/path/status; set on the thread that serves
// the request (handlers and content providers run on it), read by the logger.
struct LogInfo {
  Clock::time_point start;
  std::string detail;
};
thread_local LogInfo t_log;

constexpr auto kPollInterval = std::chrono::milliseconds(50);
// A stream with nothing to say for this long writes an SSE comment: a dead client is noticed
// (and its request cancelled) even while the request waits in the queue.
constexpr auto kKeepAliveInterval = std::chrono::milliseconds(1000);

// httplib::Server with access to its listening socket: Debian's compiled cpp-httplib listens
// with a backlog of 5, so a burst of connections overflows it and clients wait a SYN
// retransmit (1 s); bind() raises it to SOMAXCONN.
class Listener : public httplib::Server {
 public:
  int listening_socket() const { return svr_sock_; }
};

bool is_anthropic_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0;
}

void send_error(httplib::Response& res, const std::string& path, const ApiError& error) {
  res.status = error.status();
  res.set_content(is_anthropic_path(path) ? anthropic_error_body(error) : openai_error_body(error),
                  "application/json");
}

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

const char* api_name(Api api) {
  switch (api) {
    case Api::Chat:
      return "chat";
    case Api::Completion:
      return "completion";
    case Api::Messages:
      return "messages";
  }
  return "?";
}

}  // namespace

HttpServer::HttpServer(engine::Engine& engine, const ServerConfig& config)
    : engine_(engine),
      config_(config),
      http_(std::make_unique<Listener>()),
      prompter_(engine.tokenizer()),
      started_(unix_now()) {
  RINGLM_USER_CHECK(config.http_threads >= 1, "--http-threads must be at least 1");
  const auto threads = static_cast<size_t>(config.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(config.max_body_bytes);
  http_->set_keep_alive_max_count(1000);
  http_->set_keep_alive_timeout(5);  // also bounds how long shutdown waits for idle connections
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  http_->set_tcp_nodelay(true);  // each SSE event goes out at once
  routes();
}

HttpServer::~HttpServer() = default;

bool HttpServer::authorized(const httplib::Request& req) const {
  if (config_.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + config_.api_key) return true;
  return req.get_header_value("x-api-key") == config_.api_key;
}

void HttpServer::routes() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    t_log = LogInfo{Clock::now(), ""};
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(res.status);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t_log.start).count();
    std::fprintf(stderr, "ringlm serve: %s %s %d %.1f ms%s%s\n", req.method.c_str(),
                 req.path.c_str(), res.status, ms, t_log.detail.empty() ? "" : " ",
                 t_log.detail.c_str());
  });
  // Errors httplib raises itself (no route: 404, body too large: 413, bad request line: 400)
  // get the API's JSON error shape; responses that already have a body keep it.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = "error " + std::to_string(res.status);
        std::string type = "invalid_request_error";
        if (res.status == 404) {
          message = "no route for " + req.method + " " + req.path;
          type = "not_found_error";
        } else if (res.status == 413) {
          message = "the request body is larger than the server's limit";
        }
        send_error(res, req.path, ApiError(res.status, type, message));
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        send_error(res, req.path, ApiError(500, "server_error", message));
      });

  // Every route answers every method: the wrong one gets 405 rather than 404.
  struct Route {
    const char* path;
    const char* method;
    httplib::Server::Handler handler;
  };
  const Route table[] = {
      {"/", "GET",
       [](const httplib::Request&, httplib::Response& res) {
         res.set_content(std::string(web_page_html()), "text/html; charset=utf-8");
       }},
      {"/health", "GET",
       [this](const httplib::Request&, httplib::Response& res) {
         res.status = draining_ ? 503 : 200;
         res.set_content(draining_ ? R"({"status":"draining"})" : R"({"status":"ok"})",
                         "application/json");
       }},
      {"/metrics", "GET",
       [this](const httplib::Request&, httplib::Response& res) {
         res.set_content(metrics_.render(engine_.stats()), "text/plain; version=0.0.4");
       }},
      {"/v1/models", "GET",
       [this](const httplib::Request& req, httplib::Response& res) {
         if (!authorized(req))
           return send_error(res, req.path,
                             ApiError(401, "authentication_error", "invalid or missing API key"));
         Json model = {{"id", config_.model_name},
                       {"object", "model"},
                       {"created", started_},
                       {"owned_by", "ringlm"},
                       {"max_model_len", engine_.max_model_len()}};
         Json body = {{"object", "list"}, {"data", Json::array({model})}};
         res.set_content(dump(body), "application/json");
       }},
      {"/v1/chat/completions", "POST",
       [this](const httplib::Request& req, httplib::Response& res) {
         generate(req, res, static_cast<int>(Api::Chat));
       }},
      {"/v1/completions", "POST",
       [this](const httplib::Request& req, httplib::Response& res) {
         generate(req, res, static_cast<int>(Api::Completion));
       }},
      {"/v1/messages", "POST",
       [this](const httplib::Request& req, httplib::Response& res) {
         generate(req, res, static_cast<int>(Api::Messages));
       }},
  };
  for (const Route& route : table) {
    const std::string pattern = route.path;
    const std::string method = route.method;
    auto wrong_method = [method](const httplib::Request& req, httplib::Response& res) {
      send_error(res, req.path,
                 ApiError(405, "invalid_request_error",
                          req.method + " is not allowed on " + req.path + "; use " + method));
      res.set_header("Allow", method);
    };
    auto pick = [&](const char* m) {
      return method == m ? route.handler : httplib::Server::Handler(wrong_method);
    };
    s.Get(pattern, pick("GET"));
    s.Post(pattern, pick("POST"));
    s.Put(pattern, wrong_method);
    s.Patch(pattern, wrong_method);
    s.Delete(pattern, wrong_method);
  }
}

void HttpServer::generate(const httplib::Request& req, httplib::Response& res, int api_int) {
  const Api api = static_cast<Api>(api_int);
  std::shared_ptr<RequestSession> session;
  std::shared_ptr<GenerationRequest> request;
  try {
    if (!authorized(req)) throw ApiError(401, "authentication_error", "invalid or missing API key");
    if (draining_) throw ApiError(503, "overloaded_error", "the server is shutting down");
    const Json body = parse_body(req.body);
    const ParseContext ctx{engine_.tokenizer(), prompter_, engine_.max_model_len(),
                           engine_.max_sequence_tokens()};
    request = std::make_shared<GenerationRequest>(api == Api::Chat ? parse_chat_request(body, ctx)
                                                  : api == Api::Completion
                                                      ? parse_completion_request(body, ctx)
                                                      : parse_messages_request(body, ctx));
    const std::string invalid = engine_.validate(request->engine);
    if (!invalid.empty()) bad_request("", invalid);
    session = std::make_shared<RequestSession>(request->engine.n, metrics_);
    {
      std::lock_guard<std::mutex> lock(inflight_mutex_);
      ++inflight_;
    }
    try {
      session->id = engine_.submit(request->engine, session->callbacks());
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(inflight_mutex_);
      --inflight_;
      inflight_cv_.notify_all();
      if (draining_) throw ApiError(503, "overloaded_error", e.what());
      throw ApiError(400, "invalid_request_error", e.what());
    }
  } catch (const ApiError& e) {
    t_log.detail = std::string(api_name(api)) + " error: " + e.what();
    return send_error(res, req.path, e);
  } catch (const ringlm::Error& e) {
    // Tokenizer/template errors on the user's input.
    t_log.detail = std::string(api_name(api)) + " error: " + e.what();
    return send_error(res, req.path, ApiError(400, "invalid_request_error", e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A nested field of the wrong JSON type that no check above named.
    t_log.detail = std::string(api_name(api)) + " error: " + e.what();
    return send_error(res, req.path,
                      ApiError(400, "invalid_request_error",
                               std::string("a request field has the wrong type: ") + e.what()));
  }

  const ResponseMeta meta{(api == Api::Chat         ? random_id("chatcmpl-")
                           : api == Api::Completion ? random_id("cmpl-")
                                                    : random_id("msg_")),
                          unix_now(), config_.model_name};
  const ToolFormat tool_format = prompter_.tool_format();
  const int32_t marker_id = request->parse_tools ? prompter_.tool_marker_token() : -1;
  const std::string marker = tool_call_marker(tool_format);
  // The log line's detail (the logger runs on this thread once the response is written).
  auto describe = [session, request, api](const char* how) {
    const engine::Usage& u = session->usage();
    t_log.detail = std::string(api_name(api)) + (request->stream ? " stream" : "") +
                   " prompt=" + std::to_string(u.prompt_tokens) +
                   " cached=" + std::to_string(u.cached_tokens) +
                   " completion=" + std::to_string(u.completion_tokens) + " " + how;
  };
  auto release = [this] {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    --inflight_;
    inflight_cv_.notify_all();
  };
  // Cancels and waits for the engine's final event and on_done, so that the request's KV is
  // released before this connection moves on.
  auto cancel = [this, session] {
    engine_.cancel(session->id);
    std::vector<engine::Event> ignored;
    while (!session->wait(kPollInterval, ignored)) ignored.clear();
  };

  if (!request->stream) {
    std::vector<ChoiceResult> choices(static_cast<size_t>(request->engine.n));
    std::vector<engine::Event> events;
    bool done = false;
    while (!done) {
      events.clear();
      done = session->wait(kPollInterval * 20, events);
      for (auto& e : events) {
        restore_tool_marker(e, marker_id, marker);
        choices[static_cast<size_t>(e.choice)].add(e, request->logprobs);
      }
    }
    describe("done");
    release();
    for (const auto& c : choices) {
      if (c.finish == engine::FinishReason::Error || c.finish == engine::FinishReason::Cancelled)
        return send_error(
            res, req.path,
            ApiError(500, "server_error", c.error.empty() ? "the request was cancelled" : c.error));
    }
    const Json body =
        api == Api::Messages
            ? anthropic_response(meta, *request, choices[0], session->usage(), tool_format)
            : openai_response(meta, *request, choices, session->usage(), engine_.tokenizer(),
                              tool_format);
    res.set_content(dump(body), "application/json");
    return;
  }

  // Streaming: the provider runs on this connection's thread after the headers are sent and
  // writes every event as it comes; a failed write (client gone) cancels the request at once.
  struct StreamState {
    std::unique_ptr<OpenAiStream> openai;
    std::unique_ptr<AnthropicStream> anthropic;
    bool completed = false;
    bool cancelled = false;
  };
  auto state = std::make_shared<StreamState>();
  if (api == Api::Messages) {
    state->anthropic = std::make_unique<AnthropicStream>(meta, *request, tool_format);
  } else {
    state->openai =
        std::make_unique<OpenAiStream>(meta, *request, engine_.tokenizer(), tool_format);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, session, state, describe, cancel, marker_id, marker](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& text) {
          if (text.empty() || sink.write(text.data(), text.size())) return true;
          cancel();  // the client is gone
          metrics_.count_client_disconnect();
          state->cancelled = true;
          describe("client gone, cancelled");
          return false;
        };
        if (state->anthropic && !write(state->anthropic->start())) return false;
        std::vector<engine::Event> events;
        auto idle_since = Clock::now();
        while (true) {
          events.clear();
          const bool done = session->wait(kPollInterval, events);
          for (auto& e : events) {
            restore_tool_marker(e, marker_id, marker);
            if (!write(state->openai ? state->openai->on_event(e) : state->anthropic->on_event(e)))
              return false;
          }
          if (done) {
            const std::string tail = state->openai ? state->openai->on_done(session->usage())
                                                   : state->anthropic->on_done(session->usage());
            if (!write(tail)) return false;
            state->completed = true;
            describe("done");
            sink.done();
            return true;
          }
          if (!events.empty()) {
            idle_since = Clock::now();
          } else if (Clock::now() - idle_since >= kKeepAliveInterval) {
            idle_since = Clock::now();
            if (!write(state->openai ? ": keep-alive\n\n"
                                     : "event: ping\ndata: {\"type\": \"ping\"}\n\n"))
              return false;
          }
        }
      },
      [state, cancel, release](bool) {
        // Also reached when the provider never ran (the connection broke before the headers).
        if (!state->completed && !state->cancelled) cancel();
        release();
      });
}

int HttpServer::bind() {
  if (config_.port == 0) {
    const int port = http_->bind_to_any_port(config_.host);
    RINGLM_USER_CHECK(port > 0, "cannot listen on ", config_.host, " (any port)");
    config_.port = port;
  } else {
    RINGLM_USER_CHECK(http_->bind_to_port(config_.host, config_.port), "cannot listen on ",
                      config_.host, ":", config_.port, " (in use, or not an address of this host)");
  }
  // listen() again on a listening socket only changes its backlog.
  RINGLM_USER_CHECK(::listen(static_cast<Listener&>(*http_).listening_socket(), SOMAXCONN) == 0,
                    "cannot raise the listen backlog");
  return config_.port;
}

void HttpServer::serve() {
  http_->listen_after_bind();
}

void HttpServer::shutdown() {
  draining_ = true;
  engine_.drain();
  {
    // The engine is done; let the connections write what they hold (bounded: a client that
    // stopped reading must not keep the server up).
    std::unique_lock<std::mutex> lock(inflight_mutex_);
    inflight_cv_.wait_for(lock, std::chrono::seconds(30), [&] { return inflight_ == 0; });
  }
  http_->stop();
}

}  // namespace ringlm::server
