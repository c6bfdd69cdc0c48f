// Tests of detail/kernel/seccomp_filter.hpp: the libseccomp-built program refuses
// exactly what docs/contract.md item 13 (the Landlock path's metadata and
// network filter) needs, on the native ABI and every compat ABI, built once
// in the parent and loaded by one system call in a child.
//
// The expected numbers below are the kernel's own tables (arch/x86/entry/
// syscalls/syscall_{64,32}.tbl, scripts/syscall.tbl for arm64, arch/arm/
// tools/syscall.tbl for arm32), written out independently of libseccomp so
// that a libseccomp that mapped a name wrongly would fail here. A small
// classic-BPF interpreter runs the exported program against each (arch,
// number, arguments), since no test program here can make i386 or x32 calls.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bashexec/confinement/landlock.hpp>
#include <bashexec/detail/kernel/seccomp_filter.hpp>

using namespace bashexec::detail;

namespace {

constexpr std::uint32_t x32_bit = 0x40000000U;

/// A classic-BPF interpreter for what libseccomp emits (loads of seccomp_data
/// words, AND, the four conditional jumps, JA, RET).
std::uint32_t run_bpf(std::span<const sock_filter> code, const seccomp_data& data) {
  std::uint32_t a = 0;
  std::size_t pc = 0;
  while (pc < code.size()) {
    const sock_filter& in = code[pc];
    switch (in.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        REQUIRE(in.k + 4 <= sizeof data);
        std::memcpy(&a, reinterpret_cast<const char*>(&data) + in.k, 4);
        ++pc;
        break;
      case BPF_ALU | BPF_AND | BPF_K: a &= in.k; ++pc; break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += 1 + (a == in.k ? in.jt : in.jf); break;
      case BPF_JMP | BPF_JGT | BPF_K: pc += 1 + (a > in.k ? in.jt : in.jf); break;
      case BPF_JMP | BPF_JGE | BPF_K: pc += 1 + (a >= in.k ? in.jt : in.jf); break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += 1 + ((a & in.k) != 0 ? in.jt : in.jf); break;
      case BPF_JMP | BPF_JA: pc += 1 + in.k; break;
      case BPF_RET | BPF_K: return in.k;
      default: FAIL("unexpected BPF instruction " << in.code); return 0;
    }
  }
  FAIL("the program ran off its end");
  return 0;
}

std::uint32_t verdict(const seccomp_filter& filter, std::uint32_t arch, std::uint32_t nr, std::uint64_t arg0 = 0,
                      std::uint64_t arg1 = 0) {
  seccomp_data data{};
  data.arch = arch;
  data.nr = static_cast<int>(nr);
  data.args[0] = arg0;
  data.args[1] = arg1;
  return run_bpf(filter.code(), data);
}

constexpr std::uint32_t ret_errno(int error) { return SECCOMP_RET_ERRNO | static_cast<std::uint32_t>(error); }

/// One ABI as the kernel sees it, with its expected numbers.
struct abi {
  const char* name;
  std::uint32_t arch;
  std::uint32_t nr_bits;  // OR-ed into every number (x32)
  std::vector<std::uint32_t> metadata;
  std::vector<std::uint32_t> socket_calls;  // socket, socketpair: refused unless AF_UNIX
  std::vector<std::uint32_t> refused_whole;  // socketcall: EPERM whatever the arguments
  std::vector<std::uint32_t> ioctl;
};

// setxattrat, removexattrat, file_setattr, fchmodat2 and io_uring_setup: one
// number on every ABI.
constexpr std::uint32_t io_uring_setup_nr = 425;
const std::vector<std::uint32_t> unified_metadata{452, 463, 466, 469};

std::vector<abi> abis() {
#if defined(__x86_64__)
  const std::vector<std::uint32_t> x86_64_metadata{90,  91,  268, 92,  93,  94,  260, 132, 235, 261,
                                                   280, 188, 189, 190, 197, 198, 199};
  return {
      {"x86_64", AUDIT_ARCH_X86_64, 0, x86_64_metadata, {41, 53}, {}, {16}},
      {"x32", AUDIT_ARCH_X86_64, x32_bit, x86_64_metadata, {41, 53}, {}, {514}},
      {"i386", AUDIT_ARCH_I386, 0,
       {15, 94, 306, 182, 95, 16, 212, 207, 198, 298, 30, 271, 299, 320, 412, 226, 227, 228, 235, 236, 237},
       {359, 360}, {102}, {54}},
  };
#elif defined(__aarch64__)
  return {
      {"aarch64", AUDIT_ARCH_AARCH64, 0, {52, 53, 55, 54, 88, 5, 6, 7, 14, 15, 16}, {198, 199}, {}, {29}},
      {"arm32", AUDIT_ARCH_ARM, 0,
       {15, 94, 333, 182, 95, 16, 212, 207, 198, 325, 269, 326, 348, 412, 226, 227, 228, 235, 236, 237},
       {281, 288}, {}, {54}},
  };
#else
  return {};
#endif
}

/// The three programs a spawn can load, built in place (a filter never moves).
struct every_part {
  seccomp_filter metadata{{.network = false, .metadata_writes = true}};
  seccomp_filter network{{.network = true, .metadata_writes = false}};
  seccomp_filter both{{.network = true, .metadata_writes = true}};
};

}  // namespace

/// Skips the rest of a test case, visibly, where no filter is built.
#define SKIP_WITHOUT_SECCOMP_FILTER()                                  \
  if (!seccomp_filter_supported) {                                     \
    WARN("skipped: no seccomp filter for this architecture");          \
    return;                                                            \
  }

TEST_CASE("seccomp filter: each part refuses exactly its syscalls on the native and every compat ABI (contract 13)",
          "[seccomp]") {
  SKIP_WITHOUT_SECCOMP_FILTER();
  const every_part filters;
  const auto& [metadata, network, both] = filters;
  CHECK(metadata.program().len == metadata.code().size());
  CHECK(metadata.program().filter == metadata.code().data());

  for (const abi& table : abis()) {
    INFO(table.name);
    std::vector<std::uint32_t> refused_metadata = table.metadata;
    refused_metadata.insert(refused_metadata.end(), unified_metadata.begin(), unified_metadata.end());
    std::set<std::uint32_t> special{io_uring_setup_nr};
    for (std::uint32_t nr : refused_metadata) {
      INFO("metadata syscall " << nr);
      special.insert(nr);
      CHECK(verdict(metadata, table.arch, table.nr_bits | nr) == ret_errno(EACCES));
      CHECK(verdict(both, table.arch, table.nr_bits | nr) == ret_errno(EACCES));
      CHECK(verdict(network, table.arch, table.nr_bits | nr) == SECCOMP_RET_ALLOW);
    }
    for (std::uint32_t nr : table.socket_calls) {
      INFO("socket syscall " << nr);
      special.insert(nr);
      CHECK(verdict(network, table.arch, table.nr_bits | nr, AF_INET) == ret_errno(EPERM));
      CHECK(verdict(both, table.arch, table.nr_bits | nr, AF_INET6) == ret_errno(EPERM));
      CHECK(verdict(network, table.arch, table.nr_bits | nr, AF_NETLINK) == ret_errno(EPERM));
      CHECK(verdict(network, table.arch, table.nr_bits | nr, AF_UNIX) == SECCOMP_RET_ALLOW);
      CHECK(verdict(both, table.arch, table.nr_bits | nr, AF_UNIX) == SECCOMP_RET_ALLOW);
      CHECK(verdict(metadata, table.arch, table.nr_bits | nr, AF_INET) == SECCOMP_RET_ALLOW);
    }
    for (std::uint32_t nr : table.refused_whole) {
      INFO("socketcall " << nr);
      special.insert(nr);
      CHECK(verdict(network, table.arch, nr, 1 /* SYS_SOCKET */) == ret_errno(EPERM));
      CHECK(verdict(metadata, table.arch, nr, 1) == SECCOMP_RET_ALLOW);
    }
    // io_uring's SOCKET and SETXATTR ops would go around both parts.
    for (const seccomp_filter* filter : {&metadata, &network, &both})
      CHECK(verdict(*filter, table.arch, table.nr_bits | io_uring_setup_nr) == ret_errno(ENOSYS));
    // Every other number in the ordinary range passes every part (ioctl
    // passes with a harmless command).
    for (std::uint32_t nr = 0; nr < 470; ++nr) {
      if (special.count(nr) != 0) continue;
      INFO("other syscall " << nr);
      for (const seccomp_filter* filter : {&metadata, &network, &both})
        CHECK(verdict(*filter, table.arch, table.nr_bits | nr, 3, 0x5401 /* TCGETS */) == SECCOMP_RET_ALLOW);
    }
  }
  // A foreign ABI gets ENOSYS whatever the parts.
  for (const seccomp_filter* filter : {&metadata, &network, &both})
    CHECK(verdict(*filter, 0x12345678U, 0) == ret_errno(ENOSYS));
  // A domain of AF_UNIX with garbage in the high word is refused: libseccomp
  // compares all 64 bits, stricter than the kernel's int (never looser).
  if (!abis().empty())
    CHECK(verdict(network, abis()[0].arch, abis()[0].socket_calls[0], 0x100000000ULL | AF_UNIX) == ret_errno(EPERM));
}

TEST_CASE("seccomp filter: under metadata_writes the inode-attribute ioctls (chattr) are refused on every ABI, "
          "every other ioctl passes",
          "[seccomp]") {
  SKIP_WITHOUT_SECCOMP_FILTER();
  const every_part filters;
  const auto& [metadata, network, both] = filters;

  // The commands agree with the kernel's header where it spells them.
  const auto refused_cmd = [](std::uint32_t cmd) {
    return std::find(seccomp_metadata_ioctls.begin(), seccomp_metadata_ioctls.end(), cmd) !=
           seccomp_metadata_ioctls.end();
  };
  CHECK(refused_cmd(static_cast<std::uint32_t>(FS_IOC_SETFLAGS)));
  CHECK(refused_cmd(static_cast<std::uint32_t>(FS_IOC32_SETFLAGS)));
  CHECK(refused_cmd(static_cast<std::uint32_t>(FS_IOC_FSSETXATTR)));
  CHECK(refused_cmd(static_cast<std::uint32_t>(FS_IOC_SETVERSION)));
  CHECK(refused_cmd(static_cast<std::uint32_t>(FS_IOC32_SETVERSION)));
  CHECK_FALSE(refused_cmd(static_cast<std::uint32_t>(FS_IOC_GETFLAGS)));
  CHECK_FALSE(refused_cmd(static_cast<std::uint32_t>(FS_IOC_FSGETXATTR)));

  constexpr std::uint64_t fd = 3;
  for (const abi& table : abis()) {
    const std::uint32_t nr = table.nr_bits | table.ioctl.at(0);
    for (std::uint32_t cmd : seccomp_metadata_ioctls) {
      INFO(table.name << " ioctl cmd 0x" << std::hex << cmd);
      CHECK(verdict(metadata, table.arch, nr, fd, cmd) == ret_errno(EACCES));
      CHECK(verdict(both, table.arch, nr, fd, cmd) == ret_errno(EACCES));
      CHECK(verdict(network, table.arch, nr, fd, cmd) == SECCOMP_RET_ALLOW);
      // The kernel's cmd is an unsigned int: garbage (or a sign extension)
      // in the high word changes nothing, for the kernel or the filter.
      CHECK(verdict(metadata, table.arch, nr, fd, 0xffffffff00000000ULL | cmd) == ret_errno(EACCES));
      CHECK(verdict(metadata, table.arch, nr, fd, 0x0000000100000000ULL | cmd) == ret_errno(EACCES));
    }
    INFO(table.name);
    for (std::uint64_t harmless : {std::uint64_t{0x5401} /* TCGETS */, std::uint64_t{0x5413} /* TIOCGWINSZ */,
                                   std::uint64_t{0x80086601} /* FS_IOC_GETFLAGS */,
                                   std::uint64_t{0x80046601} /* FS_IOC32_GETFLAGS */,
                                   std::uint64_t{0x801c581f} /* FS_IOC_FSGETXATTR */,
                                   std::uint64_t{0x541b} /* FIONREAD */, std::uint64_t{0}}) {
      INFO("harmless cmd 0x" << std::hex << harmless);
      CHECK(verdict(metadata, table.arch, nr, fd, harmless) == SECCOMP_RET_ALLOW);
      CHECK(verdict(both, table.arch, nr, fd, harmless) == SECCOMP_RET_ALLOW);
    }
    // A refused command as some other syscall's second argument is nothing.
    CHECK(verdict(metadata, table.arch, table.nr_bits | 3, fd, seccomp_metadata_ioctls[0]) == SECCOMP_RET_ALLOW);
  }
}

TEST_CASE("seccomp filter: each combination of parts is built once and shared by every caller, from any thread",
          "[seccomp]") {
  SKIP_WITHOUT_SECCOMP_FILTER();
  seccomp_filter_cache cache;
  const seccomp_parts read_only{.network = false, .metadata_writes = true};
  const seccomp_parts both{.network = true, .metadata_writes = true};
  std::vector<const seccomp_filter*> got(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = &cache.get(read_only); });
  for (auto& thread : threads) thread.join();
  for (const seccomp_filter* filter : got) CHECK(filter == got[0]);
  CHECK(got[0]->parts().metadata_writes);
  CHECK_FALSE(got[0]->parts().network);
  const seccomp_filter& other = cache.get(both);
  CHECK(&other != got[0]);
  CHECK(other.parts().network);
  CHECK(&cache.get(both) == &other);
  CHECK(got[0]->program().len == got[0]->code().size());
}

TEST_CASE("landlock: read-only spawns share one ruleset and one filter built in the parent, workspace-write "
          "builds only its own ruleset (contract 13)",
          "[seccomp][landlock]") {
  if (bashexec::landlock::abi() < 1) {
    WARN("skipped: Landlock is not available here");
    return;
  }
  bashexec::sandbox_config sandbox;
  sandbox.network = bashexec::network_access::none;
  const bashexec::landlock policy{sandbox};
  const bashexec::landlock copy = policy;  // copies share what was built
  auto context = [](const bashexec::launch_plan& plan) {
    REQUIRE(plan.hooks.size() == 1);
    return static_cast<const landlock_ruleset*>(plan.hooks[0].context);
  };
  bashexec::launch_plan a, b, c, d;
  const auto launch_a = policy.prepare(bashexec::sandbox_mode::read_only, "/tmp", a);
  const auto launch_b = copy.prepare(bashexec::sandbox_mode::read_only, "/", b);
  const auto launch_c = policy.prepare(bashexec::sandbox_mode::workspace_write, "/tmp", c);
  const auto launch_d = policy.prepare(bashexec::sandbox_mode::workspace_write, "/tmp", d);
  CHECK(context(a)->number >= 0);
  CHECK(context(a)->number == context(b)->number);
  CHECK_FALSE(context(a)->fd);
  CHECK(context(a)->filter == context(b)->filter);
  CHECK(context(c)->number != context(a)->number);
  CHECK(context(c)->number != context(d)->number);
  CHECK(context(c)->filter == context(d)->filter);
  if (seccomp_filter_supported) {
    REQUIRE(context(a)->filter != nullptr);
    REQUIRE(context(c)->filter != nullptr);
    CHECK(context(a)->filter != context(c)->filter);
    CHECK(context(a)->filter->parts().metadata_writes);
    CHECK_FALSE(context(c)->filter->parts().metadata_writes);
    CHECK(context(c)->filter->parts().network);
  }
  // The shared descriptor is close-on-exec: no command inherits it.
  CHECK((::fcntl(context(a)->number, F_GETFD) & FD_CLOEXEC) != 0);
}

TEST_CASE("seccomp filter: loaded by one system call in a forked child, it refuses a real chmod (EACCES), "
          "a TCP socket (EPERM), setxattrat (EACCES) and chattr's ioctl, and lets a unix socket through",
          "[seccomp]") {
  SKIP_WITHOUT_SECCOMP_FILTER();
  const seccomp_filter both({.network = true, .metadata_writes = true});
  char path[] = "/tmp/bashexec-seccomp-XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Only async-signal-safe calls from here, as in the real hook.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(100);
    if (install_seccomp_filter(both) != 0) ::_exit(101);
    int failures = 0;
    if (!(::fchmod(file, 0) == -1 && errno == EACCES)) failures |= 1;
    if (!(::socket(AF_INET, SOCK_STREAM, 0) == -1 && errno == EPERM)) failures |= 2;
    const int unix_socket = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (unix_socket < 0) failures |= 4;
    // setxattrat(2) (Linux 6.13): refused before the kernel looks at the arguments.
    if (!(::syscall(463, AT_FDCWD, path, 0, "user.x", nullptr, 0) == -1 && errno == EACCES)) failures |= 8;
    int flags = 0;
    if (!(::ioctl(file, FS_IOC_SETFLAGS, &flags) == -1 && errno == EACCES)) failures |= 16;
    int pending = 0;
    if (unix_socket >= 0 && ::ioctl(unix_socket, FIONREAD, &pending) != 0) failures |= 32;
    ::_exit(failures);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  struct stat info {};
  REQUIRE(::fstat(file, &info) == 0);
  ::close(file);
  ::unlink(path);
  REQUIRE(WIFEXITED(status));
  INFO("failure bits " << WEXITSTATUS(status) << " (100: no_new_privs, 101: install)");
  CHECK(WEXITSTATUS(status) == 0);
  CHECK((info.st_mode & 07777) == 0600);
}
