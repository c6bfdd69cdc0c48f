// Tests of server/http_guard.hpp: the admission rules of `bashexec mcp
// --http` — Host and Origin allowlists (DNS rebinding), the bearer token and
// its file, MCP-Protocol-Version, session ids.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include <bashexec/server/http_guard.hpp>

using namespace bashexec::server::http;
namespace fs = std::filesystem;

TEST_CASE("http guard: a loopback server answers its address, localhost and the other loopback, with the port",
          "[http][guard]") {
  const auto hosts = default_hosts("127.0.0.1", 8765);
  CHECK(host_allowed("127.0.0.1:8765", hosts));
  CHECK(host_allowed("LOCALHOST:8765", hosts));
  CHECK(host_allowed("[::1]:8765", hosts));
  // A page that had evil.example resolve to 127.0.0.1 sends its own name.
  CHECK_FALSE(host_allowed("evil.example:8765", hosts));
  CHECK_FALSE(host_allowed("127.0.0.1", hosts));        // no port
  CHECK_FALSE(host_allowed("127.0.0.1:8766", hosts));   // another port
  CHECK_FALSE(host_allowed("", hosts));
  CHECK(default_hosts("10.0.0.5", 80) == std::vector<std::string>{"10.0.0.5:80"});
  CHECK(default_hosts("::1", 9)[0] == "[::1]:9");
}

TEST_CASE("http guard: no Origin passes (not a browser), a listed one passes, any other is refused",
          "[http][guard]") {
  const auto origins = default_origins(default_hosts("127.0.0.1", 8765));
  CHECK(origin_allowed(std::nullopt, origins));
  CHECK(origin_allowed("http://localhost:8765", origins));
  CHECK(origin_allowed("HTTP://127.0.0.1:8765", origins));
  CHECK_FALSE(origin_allowed("http://evil.example", origins));
  CHECK_FALSE(origin_allowed("null", origins));
  CHECK_FALSE(origin_allowed("https://127.0.0.1:8765", origins));  // not listed unless an operator adds it
  CHECK_FALSE(origin_allowed("", origins));
}

TEST_CASE("http guard: the bearer token must match exactly, under a case-insensitive scheme", "[http][guard]") {
  const std::string token = "s3cret-token-0123456789";
  CHECK(bearer_matches("Bearer " + token, token));
  CHECK(bearer_matches("bearer " + token, token));
  CHECK_FALSE(bearer_matches(std::nullopt, token));
  CHECK_FALSE(bearer_matches("Bearer " + token + "x", token));
  CHECK_FALSE(bearer_matches("Bearer " + token.substr(1), token));
  CHECK_FALSE(bearer_matches("Basic " + token, token));
  CHECK_FALSE(bearer_matches("Bearer  " + token, token));
  CHECK_FALSE(bearer_matches("Bearer ", token));
  CHECK_FALSE(bearer_matches("Bearer x", ""));  // no token configured: nothing matches
  CHECK(constant_time_equal("", ""));
  CHECK_FALSE(constant_time_equal("a", ""));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
}

TEST_CASE("http guard: a token file must be the owner's alone (or read-only for its own group), one line of visible "
          "ASCII, 16 characters or more",
          "[http][guard]") {
  const fs::path dir = fs::temp_directory_path() / ("bashexec-token-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    const fs::path path = dir / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  };
  CHECK(read_token_file(write("good", "abcdefghijklmnop1234\n", 0600)) == "abcdefghijklmnop1234");
  CHECK(read_token_file(write("crlf", "abcdefghijklmnop1234\r\nignored\n", 0400)) == "abcdefghijklmnop1234");
  const auto refused = [&](const fs::path& path, const std::string& why) {
    INFO(path);
    try {
      read_token_file(path);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains("--token-file") && Catch::Contains(why));
    }
  };
  // A Kubernetes Secret mounted with fsGroup: group-read in the process's own group.
  CHECK(read_token_file(write("own-group", "abcdefghijklmnop1234\n", 0440)) == "abcdefghijklmnop1234");
  refused(write("group-writes", "abcdefghijklmnop1234\n", 0660), "others");
  const fs::path foreign = write("foreign-group", "abcdefghijklmnop1234\n", 0640);
  if (::chown(foreign.c_str(), static_cast<uid_t>(-1), 65534) == 0 && !in_own_group(65534))
    refused(foreign, "others");
  else
    WARN("cannot give a file a group this process is not in (not root?): the foreign-group case is skipped");
  refused(write("world", "abcdefghijklmnop1234\n", 0604), "others");
  refused(write("short", "short\n", 0600), "at least 16");
  refused(write("space", "abcdefgh ijklmnop1234\n", 0600), "visible ASCII");
  refused(write("empty", "", 0600), "");
  refused(dir / "missing", "cannot be read");
  refused(dir, "regular file");
  fs::remove_all(dir);
}

TEST_CASE("http guard: MCP-Protocol-Version absent means 2025-03-26, a version not spoken is refused",
          "[http][guard]") {
  CHECK(header_protocol_version(std::nullopt) == "2025-03-26");
  CHECK(header_protocol_version("2025-11-25") == "2025-11-25");
  CHECK(header_protocol_version("2024-11-05") == "2024-11-05");
  CHECK_FALSE(header_protocol_version("2099-01-01"));
  CHECK_FALSE(header_protocol_version(""));
}

TEST_CASE("http guard: session ids are 32 random hex digits, and only that shape is looked up", "[http][guard]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = new_session_id();
    CHECK(plausible_session_id(id));
    seen.insert(id);
  }
  CHECK(seen.size() == 1000);
  CHECK_FALSE(plausible_session_id(""));
  CHECK_FALSE(plausible_session_id("0123456789ABCDEF0123456789abcdef"));  // upper case is not ours
  CHECK_FALSE(plausible_session_id("0123456789abcdef0123456789abcde"));   // 31
  CHECK_FALSE(plausible_session_id("../../../../etc/passwd0123456789ab"));
}
