// The bodies of detail/kernel/pseudo_terminal.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/kernel/pseudo_terminal.hpp"

#include <cerrno>
#include <cstdlib>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

namespace bashexec::detail {

BASHEXEC_DECL pseudo_terminal open_pseudo_terminal(terminal_size size) {
  pseudo_terminal pty;
  pty.master = unique_fd(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.master) throw_syscall("posix_openpt");
  if (::grantpt(pty.master.get()) != 0) throw_syscall("grantpt");
  if (::unlockpt(pty.master.get()) != 0) throw_syscall("unlockpt");
#ifdef TIOCGPTPEER
  pty.slave = unique_fd(::ioctl(pty.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
#endif
  if (!pty.slave) {
    char name[128];
    if (int error = ::ptsname_r(pty.master.get(), name, sizeof name); error != 0) throw_syscall("ptsname_r", error);
    pty.slave = unique_fd(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!pty.slave) throw_syscall("open the terminal's slave");
  }
  // Both above 0-2 (a host that closed its stdio must not hand them out).
  for (unique_fd* fd : {&pty.master, &pty.slave})
    if (fd->get() <= 2) {
      const int moved = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, 3);
      if (moved < 0) throw_syscall("fcntl(F_DUPFD_CLOEXEC)");
      fd->reset(moved);
    }
  termios settings{};
  if (::tcgetattr(pty.slave.get(), &settings) != 0) throw_syscall("tcgetattr");
  settings.c_oflag &= ~static_cast<tcflag_t>(ONLCR);
  if (::tcsetattr(pty.slave.get(), TCSANOW, &settings) != 0) throw_syscall("tcsetattr");
  resize_terminal(pty.master.get(), size);
  if (::fcntl(pty.master.get(), F_SETFL, O_NONBLOCK) != 0) throw_syscall("fcntl(O_NONBLOCK)");
  return pty;
}

BASHEXEC_DECL void resize_terminal(int master, terminal_size size) {
  winsize window{};
  window.ws_row = size.rows;
  window.ws_col = size.columns;
  if (::ioctl(master, TIOCSWINSZ, &window) != 0) throw_syscall("ioctl(TIOCSWINSZ)");
}

BASHEXEC_DECL pid_t terminal_foreground_group(int master) noexcept {
  pid_t group = -1;
  if (::ioctl(master, TIOCGPGRP, &group) != 0) return -1;
  return group > 0 ? group : -1;
}

BASHEXEC_DECL char terminal_control_character(int master, int which, char fallback) noexcept {
  termios settings{};
  if (::tcgetattr(master, &settings) != 0) return fallback;
  const cc_t c = settings.c_cc[which];
  return c == _POSIX_VDISABLE ? fallback : static_cast<char>(c);
}

BASHEXEC_DECL bool terminal_is_raw(int master) noexcept {
  termios settings{};
  if (::tcgetattr(master, &settings) != 0) return false;
  return (settings.c_lflag & ICANON) == 0;
}

BASHEXEC_DECL dev_t terminal_device(int slave) {
  struct stat info {};
  if (::fstat(slave, &info) != 0) throw_syscall("fstat the terminal's slave");
  return info.st_rdev;
}

}  // namespace bashexec::detail
