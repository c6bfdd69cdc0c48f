// The `bash` tool's network escalation (issue 28; tools/escalation.hpp):
// under `sandbox.network = allowlist` a call may ask for names beyond the
// allowed domains (`network_permissions` + `justification`); a person is
// asked, through the same approval callback and outcomes as the file-mode
// escalation, and only `allowed-once` widens that one call's allowlist.
// Real executors, real namespaces and the real proxy: the names asked for map
// to 127.0.0.1 in the policy's host map, so a granted name gets past the
// domain check and is then refused as a private address — the report shows
// which rule stopped it, and no packet leaves the command's namespace.

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/network/egress_proxy.hpp>
#include <bashexec/spawn/fork_exec.hpp>
#include <bashexec/server/mcp_protocol.hpp>
#include <bashexec/session/session_log.hpp>
#include <bashexec/tools/bash_tools.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

using namespace bashexec;
using namespace test_support;
using json = nlohmann::json;

namespace {

struct workspace {
  temp_dir dir{"/var/tmp", "bashexec-netesc-"};
};

executor_config escalation_config(const workspace& ws, network_access network = network_access::allowlist) {
  executor_config config = fast_config();
  config.sandbox.network = network;
  config.sandbox.default_mode = sandbox_mode::read_only;
  config.sandbox.workspace_root = ws.dir.path();
  config.cwd = ws.dir.path();
  if (network != network_access::allowlist) return config;  // an egress policy applies only there
  config.sandbox.egress.allowed_domains = {"files.test"};
  config.sandbox.egress.denied_domains = {"evil.test"};
  config.sandbox.egress.host_map = {{"pypi.org", "127.0.0.1"}, {"evil.test", "127.0.0.1"}};
  config.sandbox.egress.system_dns = false;
  config.sandbox.gateway = std::make_shared<network::asio_egress_gateway>();
  return config;
}

struct recording_approver {
  approval_outcome answer = approval_outcome::allowed_once;
  std::vector<approval_request> asked;
  std::vector<std::string> shown;
  approval_callback callback() {
    return [this](const approval_request& request) {
      asked.push_back(request);
      shown.push_back(approval_text(request).value_or("(none)"));
      return answer;
    };
  }
};

json fetch(const std::string& url) {
  return {{"command", "curl -s -o /dev/null -w '%{http_code}\\n' " + url}, {"description", "fetch a page"}};
}

json asking(json args, std::vector<std::string> names) {
  args["network_permissions"] = std::move(names);
  args["justification"] = "the build downloads its dependencies";
  return args;
}

call_context session_with(recording_approver& approver) {
  call_context context;
  context.session = owner_token("s1");
  context.approve = approver.callback();
  return context;
}

}  // namespace

TEMPLATE_TEST_CASE("network escalation: the schema offers network_permissions under an allowlist only",
                   "[tools][network][allowlist]", bwrap_executor) {
  workspace ws;
  TestType allowlisted(escalation_config(ws));
  bash_tools allowlist_tools(allowlisted);
  CHECK(allowlist_tools.schemas()[0]["input_schema"]["properties"].contains("network_permissions"));
  TestType offline(escalation_config(ws, network_access::none));
  bash_tools offline_tools(offline);
  CHECK(offline_tools.schemas()[0]["input_schema"]["properties"].contains("sandbox_permissions"));
  CHECK_FALSE(offline_tools.schemas()[0]["input_schema"]["properties"].contains("network_permissions"));

  recording_approver approver;
  const tool_result refused = offline_tools.call("bash", asking(fetch("http://pypi.org/"), {"pypi.org"}),
                                                 session_with(approver));
  CHECK(refused.is_error);
  CHECK_THAT(refused.text, Catch::Contains("\"network_permissions\" is not supported"));
  CHECK(approver.asked.empty());
}

TEMPLATE_TEST_CASE("network escalation: bad names and a missing justification are refused before anyone is asked",
                   "[tools][network][allowlist]", bwrap_executor) {
  workspace ws;
  TestType exec(escalation_config(ws));
  bash_tools tools(exec);
  recording_approver approver;
  json no_reason = fetch("http://pypi.org/");
  no_reason["network_permissions"] = {"pypi.org"};
  CHECK_THAT(tools.call("bash", no_reason, session_with(approver)).text,
             Catch::Contains("\"network_permissions\" requires \"justification\""));
  for (const json& bad : {json::array(), json{"*"}, json{"py pi.org"}, json{1}, json("pypi.org")}) {
    json args = fetch("http://pypi.org/");
    args["network_permissions"] = bad;
    args["justification"] = "x";
    INFO(bad.dump());
    const tool_result result = tools.call("bash", args, session_with(approver));
    CHECK(result.is_error);
    CHECK_THAT(result.text, Catch::Contains("network_permissions"));
  }
  CHECK(approver.asked.empty());
}

TEMPLATE_TEST_CASE("network escalation: allowed-once widens that one call's allowlist, denied names stay denied",
                   "[tools][network][allowlist]", bwrap_executor, landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  TestType exec(escalation_config(ws));
  bash_tools tools(exec);
  recording_approver approver;
  const call_context context = session_with(approver);

  const tool_result before = tools.call("bash", fetch("http://pypi.org/"), context);
  // The way forward is named, as after a file denial.
  const std::string pypi_hint =
      "\n[to reach pypi.org, repeat the same command with network_permissions [\"pypi.org\"] and a "
      "justification; do not work around the network policy]";
  CHECK(before.text == "403\n[network: blocked pypi.org:80 (not in allowed domains)]" + pypi_hint);

  const tool_result granted = tools.call("bash", asking(fetch("http://pypi.org/"), {"PyPI.org"}), context);
  INFO(granted.text);
  CHECK_FALSE(granted.is_error);
  // Past the domain check now; the address rule still holds (127.0.0.1).
  CHECK(granted.text == "403\n[network: blocked pypi.org:80 (private address)]");
  REQUIRE(approver.asked.size() == 1);
  const approval_request& asked = approver.asked[0];
  CHECK(asked.requested_domains == std::vector<std::string>{"pypi.org"});
  CHECK(asked.current_mode == sandbox_mode::read_only);
  CHECK(asked.requested_mode == sandbox_mode::read_only);
  CHECK_FALSE(asked.widens_mode());
  CHECK_THAT(approver.shown[0], Catch::StartsWith("bashexec asks to run one command under read-only mode, as the "
                                                  "session does.\nNetwork access asked for, beyond the allowed "
                                                  "domains (this one command only):\n  pypi.org\nCommand (1 line"));

  const tool_result after = tools.call("bash", fetch("http://pypi.org/"), context);
  CHECK(after.text == "403\n[network: blocked pypi.org:80 (not in allowed domains)]" + pypi_hint);

  // A denied name, or an address, is not something a grant changes: no hint.
  const tool_result denied = tools.call("bash", asking(fetch("http://evil.test/"), {"evil.test"}), context);
  CHECK(denied.text == "403\n[network: blocked evil.test:80 (denied domain)]");
}

TEMPLATE_TEST_CASE("network escalation: rejected, cancelled and unavailable run nothing", "[tools][network][allowlist]",
                   bwrap_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  TestType exec(escalation_config(ws));
  bash_tools tools(exec);
  for (auto outcome : {approval_outcome::rejected, approval_outcome::cancelled, approval_outcome::unavailable}) {
    recording_approver approver;
    approver.answer = outcome;
    const json args = asking({{"command", "touch ran"}, {"description", "mark"}}, {"pypi.org", "*.npmjs.org"});
    const tool_result result = tools.call("bash", args, session_with(approver));
    INFO(to_string(outcome));
    CHECK(result.is_error);
    REQUIRE(approver.asked.size() == 1);
    CHECK(approver.asked[0].requested_domains == std::vector<std::string>{"pypi.org", "*.npmjs.org"});
    const std::string expected =
        outcome == approval_outcome::rejected
            ? "the request to run this command with network access to pypi.org, *.npmjs.org was rejected; the "
              "command did not run."
        : outcome == approval_outcome::cancelled
            ? "the approval request was cancelled before anyone answered; the command did not run"
            : "approval is unavailable right now; the command did not run";
    CHECK_THAT(result.text, Catch::StartsWith(expected));
  }
  call_context nobody;
  const tool_result unanswered =
      tools.call("bash", asking({{"command", "touch ran"}, {"description", "mark"}}, {"pypi.org"}), nobody);
  CHECK(unanswered.text ==
        "running this command with network access to pypi.org needs a person's approval, but nobody can approve "
        "requests in this session; the command did not run");
}

TEMPLATE_TEST_CASE("network escalation: allowed-for-session grants the names to every later call of the session, "
                   "durably, and to no other session",
                   "[tools][network][allowlist]", bwrap_executor, landlock_executor) {
  SKIP_UNLESS(backend_missing<TestType>(true));
  workspace ws;
  TestType exec(escalation_config(ws));
  bash_tools tools(exec);
  const auto log_file = ws.dir.path() / "logs" / "s1.jsonl";
  {
    session_log log(log_file);
    recording_approver approver;
    approver.answer = approval_outcome::allowed_for_session;
    call_context context = session_with(approver);
    context.log = &log;
    context.grant_log = &log;
    const tool_result granted = tools.call("bash", asking(fetch("http://pypi.org/"), {"pypi.org"}), context);
    CHECK(granted.text == "403\n[network: blocked pypi.org:80 (private address)]");
    CHECK(session_network_grants(log) == std::vector<std::string>{"pypi.org"});
    const tool_result later = tools.call("bash", fetch("http://pypi.org/"), context);
    CHECK(later.text == "403\n[network: blocked pypi.org:80 (private address)]");
    CHECK(approver.asked.size() == 1);  // the later call asked nobody
  }
  // Replayed from the file after a restart: still granted.
  session_log reopened(log_file);
  recording_approver none;
  call_context context = session_with(none);
  context.log = &reopened;
  CHECK(tools.call("bash", fetch("http://pypi.org/"), context).text ==
        "403\n[network: blocked pypi.org:80 (private address)]");
  // Another session, with a log of its own, is not.
  session_log other;
  context.log = &other;
  CHECK_THAT(tools.call("bash", fetch("http://pypi.org/"), context).text,
             Catch::StartsWith("403\n[network: blocked pypi.org:80 (not in allowed domains)]\n[to reach pypi.org"));
  // Only grant_network_for_session writes the event, and it checks the names.
  CHECK_THROWS_WITH(other.append("network-grant", {{"domains", {"x.test"}}}),
                    Catch::Contains("grant_network_for_session"));
  CHECK_THROWS_AS(grant_network_for_session(other, {"not a name"}), std::invalid_argument);
  CHECK(session_network_grants(other).empty());
}

TEST_CASE("network escalation: an MCP answer with remember is allowed-for-session, only a network form offers it",
          "[tools][network][mcp]") {
  approval_request files;
  files.current_mode = sandbox_mode::read_only;
  files.requested_mode = sandbox_mode::workspace_write;
  CHECK_FALSE(server::mcp::approval_form(files)["properties"].contains("remember"));
  approval_request names = files;
  names.requested_mode = sandbox_mode::read_only;
  names.requested_domains = {"pypi.org"};
  CHECK(server::mcp::approval_form(names)["properties"].contains("remember"));
  auto answer = [](json content) { return json{{"result", {{"action", "accept"}, {"content", std::move(content)}}}}; };
  CHECK(server::mcp::approval_from(answer({{"approve", true}, {"remember", true}})) ==
        approval_outcome::allowed_for_session);
  CHECK(server::mcp::approval_from(answer({{"approve", true}})) == approval_outcome::allowed_once);
  CHECK(server::mcp::approval_from(answer({{"approve", false}, {"remember", true}})) == approval_outcome::rejected);
  CHECK(parse_approval_outcome("allowed-for-session") == approval_outcome::allowed_for_session);
}
