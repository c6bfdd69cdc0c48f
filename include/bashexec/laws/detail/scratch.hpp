// laws/detail/scratch: what the law checks (laws/*.hpp) share — scratch
// directories removed afterwards, whole-file reads and writes, and a
// violation list that names the policy and the law. Internal to the laws.
#pragma once

#include <stdlib.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/core.h>

#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/laws/report.hpp"

namespace bashexec::laws::detail {

/// A fresh directory under `parent`, removed with the object.
class scratch_directory {
 public:
  scratch_directory(const std::filesystem::path& parent, const char* prefix) {
    std::string pattern = (parent / fmt::format("{}XXXXXX", prefix)).string();
    if (::mkdtemp(pattern.data()) == nullptr) bashexec::detail::throw_syscall("mkdtemp");
    path_ = pattern;
  }
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  scratch_directory(const scratch_directory&) = delete;
  scratch_directory& operator=(const scratch_directory&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Runs one law: what it reports goes to `result` as "<policy>: <law>: …";
/// an exception the law did not expect is a violation of that law too.
template <class Law>
void check_law(report& result, std::string_view policy, std::string_view law, Law&& body) {
  auto violated = [&](std::string_view what) { result.violations.push_back(fmt::format("{}: {}: {}", policy, law, what)); };
  try {
    body(violated);
  } catch (const std::exception& error) {
    violated(fmt::format("threw unexpectedly: {}", error.what()));
  } catch (...) {
    violated("threw an unknown exception");
  }
}

}  // namespace bashexec::laws::detail
