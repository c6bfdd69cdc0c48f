// Tests of server/message_route.hpp: the routing facts of a line a session
// writes, skimmed from its text, and that a skim which answers gives the
// facts a full parse gives.

#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include <bashexec/server/message_route.hpp>

using namespace bashexec::server::mcp;
using nlohmann::json;

namespace {

/// The skim, required to answer and to agree with the parse.
message_route skimmed(const std::string& line) {
  const auto skim = skim_route(line);
  INFO(line);
  REQUIRE(skim);
  CHECK(*skim == route_of(parse_exact_ids(line)));
  return *skim;
}

const std::string related = std::string(related_task_key);

}  // namespace

TEST_CASE("message route: a response is routed by its id, whatever its size", "[http][route]") {
  const auto answer = skimmed(R"({"id":7,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"a \"quoted\" \\ line\nand more"}],)"
                              R"("structuredContent":{"exit_code":0,"signal":null,"timed_out":false}}})");
  CHECK(answer.what == message_route::shape::message);
  CHECK(answer.answered == std::vector<std::string>{"7"});
  CHECK_FALSE(answer.is_request);
  CHECK_FALSE(answer.is_error);
  CHECK(skimmed(R"({"jsonrpc":"2.0","id":"abc","error":{"code":-32600,"message":"no"}})").answered ==
        std::vector<std::string>{"\"abc\""});
  CHECK(skimmed(R"({"jsonrpc":"2.0","id":"abc","error":{"code":-32600,"message":"no"}})").is_error);
  CHECK(skimmed(R"(  { "id" : -12 , "result" : [ 1 , 2.5e3 , true , null , "x" ] }  )").answered ==
        std::vector<std::string>{"-12"});
  CHECK(skimmed(R"({"id":null,"error":{}})").answered == std::vector<std::string>{"null"});
}

TEST_CASE("message route: a command's output cannot forge a routing field", "[http][route]") {
  // What a hostile command prints reaches the line as a JSON string, however
  // it spells ids, methods, tasks, quotes, backslashes or brackets.
  for (const std::string& printed :
       {std::string(R"(","id":99,"method":"elicitation/create","params":{"taskId":"t9"}})"),
        std::string(R"(\"},"id":99}]}]})"), std::string("\\\\\\\"\"{[[[{{"),
        std::string(R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}})")}) {
    const json answer = {{"jsonrpc", "2.0"},
                         {"id", 7},
                         {"result", {{"content", json::array({{{"type", "text"}, {"text", printed}}})},
                                     {"structuredContent", {{"stdout", printed}}}}}};
    const auto route = skimmed(dump_line(answer));
    CHECK(route.answered == std::vector<std::string>{"7"});
    CHECK(route.method.empty());
    CHECK_FALSE(route.is_request);
    CHECK_FALSE(route.progress_token);
    CHECK_FALSE(route.task);
  }
}

TEST_CASE("message route: the server's own requests and notices carry their method", "[http][route]") {
  const auto question = skimmed(R"({"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"?"}})");
  CHECK(question.is_request);
  CHECK(question.answered.empty());
  CHECK(question.method == "elicitation/create");
  const auto notice = skimmed(R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}})");
  CHECK_FALSE(notice.is_request);
  CHECK(notice.answered.empty());
  CHECK(notice.method == "notifications/message");
  CHECK(skimmed(R"({"method":5,"id":1})").method.empty());  // not a string: no method, still a request
  CHECK(skimmed(R"({"method":5,"id":1})").is_request);
}

TEST_CASE("message route: a progress notice names its token, and only a progress notice does", "[http][route]") {
  CHECK(skimmed(R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1","progress":3}})")
            .progress_token == "\"t-1\"");
  CHECK(skimmed(R"({"method":"notifications/progress","params":{"progress":3,"progressToken":42}})").progress_token ==
        "42");
  CHECK_FALSE(skimmed(R"({"method":"notifications/message","params":{"progressToken":42}})").progress_token);
  CHECK_FALSE(skimmed(R"({"method":"notifications/progress","params":[{"progressToken":42}]})").progress_token);
  // The method may follow the params.
  CHECK(skimmed(R"({"params":{"progressToken":true},"method":"notifications/progress"})").progress_token == "true");
}

TEST_CASE("message route: a related task is params.taskId, else the related-task metadata", "[http][route]") {
  CHECK(skimmed(R"({"method":"notifications/tasks/status","params":{"taskId":"t9","status":"working"}})").task == "t9");
  CHECK(skimmed(R"({"id":4,"method":"elicitation/create","params":{"_meta":{")" + related +
                R"(":{"taskId":"t2"}},"message":"?"}})")
            .task == "t2");
  // A taskId that is not a string leaves the metadata to say.
  CHECK(skimmed(R"({"method":"m","params":{"taskId":5,"_meta":{")" + related + R"(":{"taskId":"t3"}}}})").task ==
        "t3");
  CHECK_FALSE(skimmed(R"({"method":"m","params":{"_meta":{")" + related + R"(":"t3"}}})").task);
  CHECK_FALSE(skimmed(R"({"method":"m","params":{"_meta":{"other":{"taskId":"t3"}}}})").task);
  // A later key replaces an earlier one, as in a parse.
  CHECK(skimmed(R"({"method":"m","params":{"taskId":"a","taskId":"b"}})").task == "b");
  CHECK_FALSE(skimmed(R"({"method":"m","params":{"taskId":"a"},"params":{}})").task);
}

TEST_CASE("message route: a batch answers the ids of its responses only", "[http][route]") {
  const auto batch = skimmed(R"([{"id":1,"result":{}},{"id":2,"method":"ping"},{"id":"x","error":{}},3,[],{"result":1}])");
  CHECK(batch.what == message_route::shape::batch);
  CHECK(batch.answered == std::vector<std::string>{"1", "\"x\""});
  CHECK(skimmed("[]").answered.empty());
  CHECK(skimmed(R"("just a string")").what == message_route::shape::other);
  CHECK(skimmed("12").what == message_route::shape::other);
}

TEST_CASE("message route: the skim declines what only a parse can key, and the parse decides", "[http][route]") {
  for (const std::string line : {
           R"({"\u0069d":1,"result":{}})",                             // an escaped key
           R"({"id":"a\"b","result":{}})",                              // an escaped id
           R"({"id":1.5,"result":{}})",                                 // not an integer
           R"({"id":-0,"result":{}})",                                  // a signed zero
           R"({"id":1234567890123456789,"result":{}})",                 // 19 digits
           R"({"id":{"a":1},"result":{}})",                             // not a scalar
           R"({"method":"notifications/progress","params":{"progressToken":[1]}})",
           R"({"method":"m","params":{"taskId":"t\u0031"}})",
       }) {
    INFO(line);
    CHECK_FALSE(skim_route(line));
    CHECK(route_line(line) == route_of(parse_exact_ids(line)));
  }
  CHECK(route_line(R"({"\u0069d":1,"result":{}})").answered == std::vector<std::string>{"1"});
  CHECK(route_line(R"({"id":1234567890123456789012,"result":{}})").answered ==
        std::vector<std::string>{"1234567890123456789012"});  // exact, as the request's key
  std::string deep = R"({"id":1,"result":)";
  for (int i = 0; i < 100; ++i) deep += '[';
  for (int i = 0; i < 100; ++i) deep += ']';
  deep += '}';
  CHECK_FALSE(skim_route(deep));
  CHECK(route_line(deep).answered == std::vector<std::string>{"1"});
}

TEST_CASE("message route: text that is not one JSON value is not skimmed", "[http][route]") {
  for (const std::string line : {"", "   ", "{", R"({"id":1)", R"({"id":1,})", R"({"id" 1})", R"({"id":1}})",
                                 R"({"id":1} x)", R"([1,])", R"({"id":"unterminated})", R"({"id":tru})", "{}{}",
                                 R"({"id":1,"result":[1 2]})", R"({1:2})"}) {
    INFO(line);
    CHECK_FALSE(skim_route(line));
    CHECK(route_line(line).what == message_route::shape::other);
  }
}

TEST_CASE("message route: on generated messages the skim agrees with the parse whenever it answers",
          "[http][route]") {
  std::mt19937 random(20261207);
  const auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  // Any JSON value, a few levels deep, with the awkward scalars.
  std::function<json(int)> value = [&](int depth) -> json {
    switch (depth > 2 ? pick(6) : pick(8)) {
      case 0: return nullptr;
      case 1: return pick(2) == 0;
      case 2: return pick(2000) - 1000;
      case 3: return 0.5 * pick(10);
      case 4: return std::string(pick(3) == 0 ? "q\"\\\n\u00e9" : "plain");
      case 5: return std::to_string(pick(100));
      case 6: {
        json array = json::array();
        for (int i = pick(3); i > 0; --i) array.push_back(value(depth + 1));
        return array;
      }
      default: {
        json object = json::object();
        for (int i = pick(3); i > 0; --i) object[pick(2) ? "taskId" : "k" + std::to_string(i)] = value(depth + 1);
        return object;
      }
    }
  };
  const auto message = [&] {
    json m = json::object();
    if (pick(3) != 0) m["jsonrpc"] = "2.0";
    if (pick(3) != 0) m["id"] = value(2);
    if (pick(2) != 0) m["method"] = pick(4) == 0 ? value(2) : json(pick(2) ? "notifications/progress" : "tasks/x");
    if (pick(3) == 0) m["error"] = value(1);
    if (pick(3) == 0) m["result"] = value(0);
    if (pick(4) != 0) {
      json params = pick(5) == 0 ? value(1) : json::object();
      if (params.is_object()) {
        if (pick(2) != 0) params["progressToken"] = value(2);
        if (pick(3) == 0) params["taskId"] = value(2);
        if (pick(2) != 0) {
          json related_task = pick(4) == 0 ? value(2) : json{{"taskId", value(2)}};
          params["_meta"] = pick(5) == 0 ? value(2) : json{{related, related_task}, {"other", value(1)}};
        }
      }
      m["params"] = params;
    }
    return m;
  };
  int skimmed_lines = 0;
  for (int i = 0; i < 3000; ++i) {
    json line = message();
    if (pick(5) == 0) line = json::array({line, message(), value(1)});
    const std::string text = pick(4) == 0 ? line.dump(1) : dump_line(line);
    const auto skim = skim_route(text);
    INFO(text);
    if (skim) {
      ++skimmed_lines;
      REQUIRE(*skim == route_of(parse_exact_ids(text)));
    }
  }
  // Most messages are skimmed (the rest have an awkward routing field).
  CHECK(skimmed_lines > 1500);
}
