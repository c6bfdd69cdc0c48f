// output/detail/spill_file: one full-stream spill file, opened on a stream's first
// overflow. A failed write or close withholds the path (contract 5).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "bashexec/detail/linkage.hpp"
#include "bashexec/spill_directory.hpp"

namespace bashexec::detail {

class spill_file {
 public:
  bool is_open() const noexcept { return static_cast<bool>(fd_); }

  /// Opens the file, named by `stream` ("stdout", "stderr"); on failure the
  /// stream simply has no spill path.
  void open(spill_directory& directory, std::string_view stream);

  void write(const char* data, std::size_t size);

  /// An incomplete spill file is worth nothing: remove it, free its share of
  /// the budget, withhold the path.
  void give_up();

  /// Closes the file; a failed close or earlier failed write withholds the
  /// path, since the file may not hold the whole stream.
  void close();

  std::optional<std::filesystem::path> path() const {
    if (failed_ || path_.empty()) return std::nullopt;
    return path_;
  }

 private:
  unique_fd fd_;
  std::filesystem::path path_;
  spill_directory* directory_ = nullptr;
  std::uint64_t bytes_ = 0;
  bool failed_ = false;
  bool closed_ = false;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/output/detail/impl/spill_file.ipp"
#endif
