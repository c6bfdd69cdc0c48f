// The bodies of output/detail/spill_file.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/output/detail/spill_file.hpp"

#include <cerrno>

#include <unistd.h>

namespace bashexec::detail {

BASHEXEC_DECL void spill_file::open(spill_directory& directory, std::string_view stream) {
  try {
    auto [fd, path] = directory.create_file(stream);
    fd_ = std::move(fd);
    path_ = std::move(path);
    directory_ = &directory;
  } catch (const infrastructure_error&) {
    failed_ = true;
  }
}

BASHEXEC_DECL void spill_file::write(const char* data, std::size_t size) {
  if (!fd_) return;
  if (!directory_->charge(size)) return give_up();  // over the budget
  while (size > 0) {
    ssize_t n = ::write(fd_.get(), data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      directory_->release(size);
      return give_up();  // disk full or similar: the file would be incomplete
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    bytes_ += static_cast<std::uint64_t>(n);
  }
}

BASHEXEC_DECL void spill_file::give_up() {
  failed_ = true;
  fd_.reset();
  directory_->remove_file(path_);
  directory_->release(bytes_);
  bytes_ = 0;
}

BASHEXEC_DECL void spill_file::close() {
  if (fd_ && fd_.reset() != 0) failed_ = true;
  if (directory_ && !closed_ && !path_.empty() && !failed_) directory_->settled(path_, bytes_);
  closed_ = true;
}

}  // namespace bashexec::detail
