// Fuzz target: the routing skim of a session's line (bashexec/server/
// message_route.hpp), which the HTTP transport trusts instead of a parse.
//
// Properties, whatever the bytes:
//   - no crash, no sanitizer report, no unbounded recursion;
//   - whenever the line parses (nlohmann-json, ids kept exact) and the skim
//     answers, the skim's facts equal those of the parse: the stream a line
//     is routed to never depends on which of the two read it;
//   - route_line answers for every line.
// Half the inputs are raw text; the other half are the input's bytes laid
// out as a message in the session's own shape (the fields routing reads,
// with the input's bytes as their values), so that the skim's accepting
// paths are reached as often as its refusals.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fuzzer/FuzzedDataProvider.h>

#include <bashexec/server/message_route.hpp>

#include "fuzz_support.hpp"

namespace {

using namespace bashexec::server::mcp;

/// A value as JSON text: often a well-formed token, sometimes the raw bytes.
std::string token(FuzzedDataProvider& data) {
  switch (data.ConsumeIntegralInRange(0, 5)) {
    case 0: return std::to_string(data.ConsumeIntegral<std::int64_t>());
    case 1: return "\"" + data.ConsumeRandomLengthString(12) + "\"";
    case 2: return data.ConsumeBool() ? "null" : "true";
    case 3: return "{\"taskId\":" + token(data) + "}";
    case 4: return "[" + token(data) + "," + token(data) + "]";
    default: return data.ConsumeRandomLengthString(8);
  }
}

std::string message(FuzzedDataProvider& data) {
  std::string out = "{";
  const auto field = [&](std::string_view key, const std::string& value) {
    if (out.size() > 1) out += data.ConsumeBool() ? "," : " , ";
    out += "\"";
    out += key;
    out += "\":";
    out += value;
  };
  for (int fields = data.ConsumeIntegralInRange(0, 6); fields > 0; --fields) {
    switch (data.ConsumeIntegralInRange(0, 6)) {
      case 0: field("id", token(data)); break;
      case 1: field("method", data.ConsumeBool() ? "\"notifications/progress\"" : token(data)); break;
      case 2: field("error", token(data)); break;
      case 3: field("result", token(data)); break;
      case 4: {
        std::string params = "{\"progressToken\":" + token(data) + ",\"taskId\":" + token(data) +
                             ",\"_meta\":{\"" + std::string(related_task_key) + "\":" + token(data) + "}}";
        field("params", data.ConsumeBool() ? params : token(data));
        break;
      }
      case 5: field(data.ConsumeRandomLengthString(6), token(data)); break;
      default: field("jsonrpc", "\"2.0\"");
    }
  }
  return out + "}";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  FuzzedDataProvider data(bytes, size);
  std::string line;
  if (data.ConsumeBool()) {
    line = data.ConsumeRemainingBytesAsString();
  } else if (data.ConsumeBool()) {
    line = message(data);
  } else {
    line = "[" + message(data) + "," + message(data) + "," + token(data) + "]";
  }
  const auto skim = skim_route(line);
  const nlohmann::json parsed = parse_exact_ids(line);
  if (skim && !parsed.is_discarded()) FUZZ_CHECK(*skim == route_of(parsed));
  (void)route_line(line);
  return 0;
}
