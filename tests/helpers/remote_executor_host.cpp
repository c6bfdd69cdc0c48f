// remote_executor_host: the server end of the remote/ lane (tests/CMakeLists.txt)
// — a local_executor built from the configuration a test case gives, served
// over the executor protocol by the library's own HTTP server
// (mcp_http_server with executor_api), the way `bashexec mcp --http
// --executor-api` serves it. The lane starts one per executor a case
// builds, inside a network namespace of its own (tests/remote_test_support.hpp),
// so every call crosses a veth pair as it would cross to another machine.
//
//   remote_executor_host ADDRESS TOKEN_FILE CONFIG_JSON
//
// Prints "port N" once it listens, or "invalid_argument MESSAGE" when the
// configuration is refused (the executor's own message, naming the field),
// then serves until SIGTERM: every session's commands are killed and reaped
// before it exits 0.
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include <pthread.h>

#include <nlohmann/json.hpp>

#include <bashexec/local_executor.hpp>
#include <bashexec/server/executor_api.hpp>
#include <bashexec/server/http_guard.hpp>
#include <bashexec/server/mcp_http_server.hpp>

namespace {

std::chrono::milliseconds ms(const nlohmann::json& config, const char* key, std::chrono::milliseconds fallback) {
  return config.contains(key) ? std::chrono::milliseconds(config[key].get<long long>()) : fallback;
}

bashexec::executor_config config_from(const nlohmann::json& given) {
  bashexec::executor_config config;
  if (given.contains("cwd")) config.cwd = given["cwd"].get<std::string>();
  if (given.contains("shell")) config.shell = given["shell"].get<std::string>();
  config.default_timeout = ms(given, "default_timeout_ms", config.default_timeout);
  config.max_timeout = ms(given, "max_timeout_ms", config.max_timeout);
  config.kill_grace = ms(given, "kill_grace_ms", config.kill_grace);
  config.drain_timeout = ms(given, "drain_timeout_ms", config.drain_timeout);
  if (given.contains("output_cap")) config.output_cap = given["output_cap"].get<std::size_t>();
  if (given.contains("spill_parent")) config.spill_parent = given["spill_parent"].get<std::string>();
  if (given.contains("keep_spill_dir")) config.keep_spill_dir = given["keep_spill_dir"].get<bool>();
  if (given.contains("spill_budget_bytes")) config.spill_budget_bytes = given["spill_budget_bytes"].get<std::uint64_t>();
  if (given.contains("scrub")) {
    const auto& scrub = given["scrub"];
    config.scrub.name_fragments = scrub["name_fragments"].get<std::vector<std::string>>();
    config.scrub.name_words = scrub["name_words"].get<std::vector<std::string>>();
    config.scrub.keep = scrub["keep"].get<std::vector<std::string>>();
    config.scrub.strip_url_passwords = scrub["strip_url_passwords"].get<bool>();
  }
  // Reported on this program's stderr, which the lane passes through.
  config.error_sink = [](std::string_view message) { std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data()); };
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: remote_executor_host ADDRESS TOKEN_FILE CONFIG_JSON\n";
    return 2;
  }
  // SIGTERM is taken by a thread of its own; every thread made later inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::optional<bashexec::local_executor> executor;
  try {
    executor.emplace(config_from(nlohmann::json::parse(argv[3])));
  } catch (const std::invalid_argument& e) {
    std::cout << "invalid_argument " << e.what() << std::endl;
    return 0;
  }
  bashexec::server::mcp_http_options options;
  options.address = argv[1];
  options.token = bashexec::server::http::read_token_file(argv[2]);
  options.executor_api = bashexec::server::executor_api(*executor);
  bashexec::server::mcp_http_server server(bashexec::server::http_session_factory{}, std::move(options));
  std::cout << "port " << server.port() << std::endl;
  std::thread watcher([&] {
    int taken = 0;
    sigwait(&stop_signals, &taken);
    server.stop();
  });
  server.serve();
  // serve() returned: stopped by the signal, which the watcher has taken.
  watcher.join();
  return 0;
}
