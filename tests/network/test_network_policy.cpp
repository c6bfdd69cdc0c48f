// The egress policy's vocabulary and pure decisions (network_policy.hpp,
// network/decision.hpp; docs/contract.md "Beyond", network by name): what
// validation says, which names and addresses pass, the read-only method
// table, and the marker's exact text.
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <bashexec/egress.hpp>
#include <bashexec/network/decision.hpp>
#include <bashexec/network_policy.hpp>

using namespace bashexec;
using namespace bashexec::network;

namespace {

std::string validation_error(const network_policy& policy) {
  try {
    policy.validate();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

address ip(std::string_view text) {
  auto parsed = address::parse(text);
  REQUIRE(parsed.has_value());
  return *parsed;
}

network_attempt blocked(std::string host, std::uint16_t port, network_block_reason reason) {
  network_attempt attempt;
  attempt.host = std::move(host);
  attempt.port = port;
  attempt.method = "CONNECT";
  attempt.decision = network_decision::blocked;
  attempt.reason = reason;
  return attempt;
}

}  // namespace

static_assert(to_string(network_methods::read_only) == "read-only");
static_assert(to_string(network_methods::all) == "all");
static_assert(parse_network_methods("read-only") == network_methods::read_only);
static_assert(!parse_network_methods("read_only").has_value());
static_assert(to_string(network_block_reason::not_allowed) == "not_allowed");
static_assert(to_string(network_block_reason::private_address) == "private_address");
static_assert(parse_network_block_reason("method_not_allowed") == network_block_reason::method_not_allowed);
static_assert(to_string(network_decision::blocked) == "blocked");

TEST_CASE("the default policy validates and allows nothing by name", "[network][policy]") {
  network_policy policy;
  CHECK_NOTHROW(policy.validate());
  CHECK(judge_name(policy, "example.com") == domain_verdict::not_allowed);
  CHECK(judge_request(policy, "GET", "example.com") == network_block_reason::not_allowed);
}

TEST_CASE("validation names the offending field exactly", "[network][policy]") {
  network_policy policy;
  policy.allowed_domains = {"a.com", "b.com", "*x.com"};
  CHECK(validation_error(policy) == R"(network.allowed_domains[2]: "*x.com" is not a domain name or *.wildcard)");

  policy = {};
  policy.allowed_domains = {"*"};
  CHECK(validation_error(policy) == R"(network.allowed_domains[0]: "*" is not a domain name or *.wildcard)");

  policy = {};
  policy.denied_domains = {"ok.com", "bad_name.com"};
  CHECK(validation_error(policy) ==
        R"(network.denied_domains[1]: "bad_name.com" is not a domain name or *.wildcard)");

  policy = {};
  policy.allowed_ranges = {"10.0.0.0/33"};
  CHECK(validation_error(policy).starts_with(R"(network.allowed_ranges[0]: "10.0.0.0/33" is not a CIDR range)"));
  policy.allowed_ranges = {"fd00::/8", "fd00::/129"};
  CHECK(validation_error(policy).starts_with(R"(network.allowed_ranges[1]: "fd00::/129")"));
  policy.allowed_ranges = {"10.0.0.0/"};
  CHECK(validation_error(policy).starts_with("network.allowed_ranges[0]:"));

  policy = {};
  policy.host_map = {{"a.test", "not-an-ip"}};
  CHECK(validation_error(policy) == R"(network.host_map["a.test"]: "not-an-ip" is not an IPv4 or IPv6 address)");
  policy.host_map = {{"under_score.test", "127.0.0.1"}};
  CHECK(validation_error(policy) == R"(network.host_map["under_score.test"]: the key is not a domain name)");

  policy = {};
  policy.limits.max_connections = 0;
  CHECK(validation_error(policy) == "network.limits.max_connections: must be positive, got 0");
  policy = {};
  policy.limits.idle_timeout = std::chrono::milliseconds{0};
  CHECK(validation_error(policy) == "network.limits.idle_timeout: must be positive, got 0 ms");

  CHECK(network_methods_from("read-only") == network_methods::read_only);
  CHECK_THROWS_WITH(network_methods_from("ro"), R"(network.methods: unknown network methods "ro" (all or read-only))");
}

TEST_CASE("a wildcard matches strict subdomains and not the apex", "[network][policy]") {
  network_policy policy;
  policy.allowed_domains = {"*.example.com"};
  CHECK(judge_name(policy, "a.example.com") == domain_verdict::allowed);
  CHECK(judge_name(policy, "a.b.example.com") == domain_verdict::allowed);
  CHECK(judge_name(policy, "example.com") == domain_verdict::not_allowed);
  CHECK(judge_name(policy, "badexample.com") == domain_verdict::not_allowed);
  CHECK(judge_name(policy, "example.com.evil.org") == domain_verdict::not_allowed);

  policy.allowed_domains = {"Example.COM."};
  CHECK(judge_name(policy, "example.com") == domain_verdict::allowed);
  CHECK(judge_name(policy, "EXAMPLE.com.") == domain_verdict::allowed);
  CHECK(judge_name(policy, "a.example.com") == domain_verdict::not_allowed);
}

TEST_CASE("a denied domain wins over an allowed one", "[network][policy]") {
  network_policy policy;
  policy.allowed_domains = {"*.example.com", "example.com"};
  policy.denied_domains = {"secret.example.com"};
  CHECK(judge_name(policy, "www.example.com") == domain_verdict::allowed);
  CHECK(judge_name(policy, "secret.example.com") == domain_verdict::denied);
  CHECK(judge_request(policy, "GET", "SECRET.example.com") == network_block_reason::denied_domain);
  CHECK(judge_name(policy, "a.secret.example.com") == domain_verdict::allowed);
  policy.denied_domains = {"*.example.com"};
  CHECK(judge_name(policy, "a.secret.example.com") == domain_verdict::denied);
  CHECK(judge_name(policy, "example.com") == domain_verdict::allowed);
}

TEST_CASE("every special range is special and public addresses are not", "[network][policy]") {
  for (auto text : {"127.0.0.1", "127.255.255.254", "::1", "10.0.0.1", "10.255.255.255", "172.16.0.1",
                    "172.31.255.255", "192.168.1.1", "fc00::1", "fd12:3456::1", "169.254.169.254", "169.254.0.1",
                    "fe80::1", "febf::1", "100.64.0.1", "100.127.255.255", "224.0.0.1", "239.255.255.255",
                    "ff02::1", "0.0.0.0", "0.1.2.3", "::", "255.255.255.255", "::ffff:10.0.0.1",
                    "::ffff:127.0.0.1", "::ffff:169.254.169.254"}) {
    INFO(text);
    CHECK(address_is_special(ip(text)));
  }
  for (auto text : {"8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.0", "100.63.255.255", "100.128.0.0",
                    "192.169.0.1", "169.253.255.255", "11.0.0.1", "2001:4860:4860::8888", "fec0::1",
                    "::ffff:8.8.8.8", "223.255.255.255"}) {
    INFO(text);
    CHECK_FALSE(address_is_special(ip(text)));
  }
}

TEST_CASE("an allowed range admits special addresses inside it only", "[network][policy]") {
  network_policy policy;
  CHECK_FALSE(address_allowed(policy, ip("10.1.2.3")));
  CHECK(address_allowed(policy, ip("8.8.8.8")));
  policy.allowed_ranges = {"10.1.0.0/16", "fd00:1::/32"};
  CHECK(address_allowed(policy, ip("10.1.2.3")));
  CHECK(address_allowed(policy, ip("::ffff:10.1.2.3")));
  CHECK_FALSE(address_allowed(policy, ip("10.2.0.1")));
  CHECK(address_allowed(policy, ip("fd00:1::5")));
  CHECK_FALSE(address_allowed(policy, ip("fd00:2::5")));
  CHECK_FALSE(address_allowed(policy, ip("169.254.169.254")));

  policy.allowed_ranges = {"127.0.0.0/8"};
  std::vector<address> resolved{ip("169.254.169.254"), ip("127.0.0.1"), ip("10.0.0.1")};
  auto vetted = vet_addresses(policy, resolved);
  REQUIRE(vetted.addresses.size() == 1);
  CHECK(vetted.addresses[0] == ip("127.0.0.1"));
  CHECK(vetted.reason == network_block_reason::none);

  policy.allowed_ranges = {};
  vetted = vet_addresses(policy, resolved);
  CHECK(vetted.addresses.empty());
  CHECK(vetted.reason == network_block_reason::private_address);
  CHECK(vet_addresses(policy, {}).reason == network_block_reason::resolve_failed);
}

TEST_CASE("an IP-literal host is refused unless an allowed range holds it", "[network][policy]") {
  network_policy policy;
  policy.allowed_domains = {"*.example.com"};
  CHECK(judge_request(policy, "CONNECT", "8.8.8.8") == network_block_reason::not_allowed);
  CHECK(judge_request(policy, "CONNECT", "2001:4860:4860::8888") == network_block_reason::not_allowed);
  CHECK(judge_request(policy, "GET", "10.0.0.1") == network_block_reason::private_address);
  CHECK(judge_request(policy, "GET", "169.254.169.254") == network_block_reason::private_address);
  CHECK(judge_request(policy, "GET", "::1") == network_block_reason::private_address);
  policy.allowed_ranges = {"8.8.8.0/24", "10.0.0.0/8"};
  CHECK(judge_request(policy, "CONNECT", "8.8.8.8") == network_block_reason::none);
  CHECK(judge_request(policy, "GET", "10.0.0.1") == network_block_reason::none);
  CHECK(judge_request(policy, "GET", "10.0.0.1.example.com") == network_block_reason::none);
}

TEST_CASE("read-only admits GET, HEAD and OPTIONS on plain HTTP and nothing else", "[network][policy]") {
  network_policy policy;
  policy.allowed_domains = {"files.test"};
  for (auto method : {"GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH", "CONNECT", "SOCKS"})
    CHECK(judge_request(policy, method, "files.test") == network_block_reason::none);
  policy.methods = network_methods::read_only;
  for (auto method : {"GET", "HEAD", "OPTIONS"}) {
    INFO(method);
    CHECK(judge_request(policy, method, "files.test") == network_block_reason::none);
  }
  for (auto method : {"POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT", "SOCKS", "get"}) {
    INFO(method);
    CHECK(judge_request(policy, method, "files.test") == network_block_reason::method_not_allowed);
  }
  // The host is judged first: a name outside the list says so, whatever the method.
  CHECK(judge_request(policy, "CONNECT", "other.test") == network_block_reason::not_allowed);
}

TEST_CASE("host_map is consulted by canonical name", "[network][policy]") {
  network_policy policy;
  policy.host_map = {{"Files.Test", "127.0.0.1"}, {"v6.test", "::1"}};
  REQUIRE(policy.host_map.size() == 2);
  CHECK(mapped_address(policy, "files.test") == ip("127.0.0.1"));
  CHECK(mapped_address(policy, "FILES.TEST.") == ip("127.0.0.1"));
  CHECK(mapped_address(policy, "v6.test") == ip("::1"));
  CHECK_FALSE(mapped_address(policy, "x.files.test").has_value());
}

TEST_CASE("the marker lists blocked hosts once each, in order, byte for byte", "[network][marker]") {
  network_report report;
  CHECK(network_marker(report) == "");

  network_attempt allowed;
  allowed.host = "files.test";
  allowed.port = 80;
  allowed.method = "GET";
  allowed.decision = network_decision::allowed;
  report.attempts = {allowed};
  CHECK(network_marker(report) == "");

  report.attempts = {blocked("pypi.org", 443, network_block_reason::not_allowed)};
  CHECK(network_marker(report) == "[network: blocked pypi.org:443 (not in allowed domains)]");

  report.attempts = {blocked("a.test", 443, network_block_reason::not_allowed), allowed,
                     blocked("10.0.0.1", 80, network_block_reason::private_address),
                     blocked("a.test", 443, network_block_reason::not_allowed)};
  CHECK(network_marker(report) ==
        "[network: blocked a.test:443 (not in allowed domains), 10.0.0.1:80 (private address)]");

  report.attempts = {blocked("a.test", 80, network_block_reason::denied_domain),
                     blocked("a.test", 443, network_block_reason::method_not_allowed),
                     blocked("::1", 8080, network_block_reason::private_address),
                     blocked("", 0, network_block_reason::limit),
                     blocked("gone.test", 80, network_block_reason::resolve_failed),
                     blocked("x.test", 80, network_block_reason::bad_request)};
  CHECK(network_marker(report) ==
        "[network: blocked a.test:80 (denied domain), a.test:443 (method not allowed), [::1]:8080 (private "
        "address), a request (limit reached), gone.test:80 (could not resolve), x.test:80 (bad request)]");
}

TEST_CASE("the marker names at most eight hosts, then counts the rest", "[network][marker]") {
  network_report report;
  for (int i = 0; i < 12; ++i) {
    report.attempts.push_back(blocked("h" + std::to_string(i) + ".test", 443, network_block_reason::not_allowed));
    report.attempts.push_back(blocked("h" + std::to_string(i) + ".test", 443, network_block_reason::not_allowed));
  }
  std::string expected = "[network: blocked ";
  for (int i = 0; i < 8; ++i) expected += (i ? ", h" : "h") + std::to_string(i) + ".test:443 (not in allowed domains)";
  expected += ", and 4 more]";
  CHECK(network_marker(report) == expected);
}

TEST_CASE("address and range parsing", "[network][policy]") {
  CHECK_FALSE(address::parse("").has_value());
  CHECK_FALSE(address::parse("1.2.3").has_value());
  CHECK_FALSE(address::parse("[::1]").has_value());
  CHECK_FALSE(address::parse("files.test").has_value());
  CHECK(ip("::ffff:10.0.0.1").unmapped() == ip("10.0.0.1"));
  CHECK(ip("2001:db8::1").to_string() == "2001:db8::1");
  auto range = address_range::parse("10.1.2.3/8");
  REQUIRE(range.has_value());
  CHECK(range->contains(ip("10.200.0.1")));
  CHECK_FALSE(range->contains(ip("11.0.0.1")));
  CHECK_FALSE(range->contains(ip("::a01:203")));
  auto all_v4 = address_range::parse("0.0.0.0/0");
  REQUIRE(all_v4.has_value());
  CHECK(all_v4->contains(ip("203.0.113.9")));
  CHECK_FALSE(all_v4->contains(ip("2001:db8::1")));
  auto single = address_range::parse("192.168.1.5");
  REQUIRE(single.has_value());
  CHECK(single->contains(ip("192.168.1.5")));
  CHECK_FALSE(single->contains(ip("192.168.1.6")));
  CHECK_FALSE(address_range::parse("10.0.0.0/-1").has_value());
  CHECK_FALSE(address_range::parse("10.0.0.0/08x").has_value());
}

// egress.hpp is the executor's seam: an in-memory gateway models it.
namespace {
class recorded_session final : public egress_session {
 public:
  network_report snapshot() const override { return report_; }
  void close() override { closed_ = true; }
  network_report report_;
  bool closed_ = false;
};
class recorded_gateway final : public egress_gateway {
 public:
  std::unique_ptr<egress_session> open(unique_fd, const network_policy&) override {
    return std::make_unique<recorded_session>();
  }
};
}  // namespace

TEST_CASE("the egress seam holds without Asio", "[network][policy]") {
  recorded_gateway gateway;
  auto session = gateway.open(unique_fd{}, network_policy{});
  REQUIRE(session != nullptr);
  CHECK(session->snapshot().attempts.empty());
  session->close();
}
