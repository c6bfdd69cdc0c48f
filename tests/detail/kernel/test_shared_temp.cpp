// Directories in shared temp space (docs/contract.md "Beyond": per user,
// opened without following links, checked for owner and mode; spill files
// bounded in total and cleaned up). The attacks need a second user: each
// case runs as root in a private mount namespace whose /var/tmp and /dev/shm
// are fresh tmpfs — the shared space of the attack, seen by no other test —
// and plays the victim as root and as the ordinary user nobody (setpriv).
#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <bashexec/detail/kernel/shared_temp.hpp>
#include <bashexec/spill_directory.hpp>
#include <bashexec/local_executor.hpp>

#include "executor_test_support.hpp"
#include "sandbox_test_support.hpp"

namespace fs = std::filesystem;
using test_support::slurp;
using test_support::temp_dir;

namespace {

constexpr int nobody = 65534;
constexpr int stranger = 4242;  // a third user: the attacker when nobody is the victim

/// Why the attacks cannot be played here, if they cannot.
std::optional<std::string> private_temp_missing() {
  if (::geteuid() != 0) return "needs root (a second user, a private mount namespace)";
  if (std::system("command -v setpriv >/dev/null && command -v unshare >/dev/null") != 0)
    return "needs setpriv and unshare (util-linux)";
  if (std::system("unshare --mount --propagation private true 2>/dev/null") != 0)
    return "no private mount namespace here";
  return std::nullopt;
}

/// Runs `script` (sh, `set -u`) as root in a private mount namespace with
/// fresh tmpfs on /var/tmp and /dev/shm; returns what it printed. In the
/// script, `as UID CMD…` runs CMD as UID (root directly), `cli UID ARGS…`
/// runs bashexec as UID without XDG_RUNTIME_DIR (`xcli` execs it, for a
/// background job whose pid must be bashexec's), and `$ns` is the inode of
/// the pid namespace (the first part of an owner stamp); `printed_path`
/// filters a result's text down to the spill path it printed.
std::string in_private_temp(const std::string& script) {
  temp_dir scratch;
  const fs::path file = scratch.path() / "script.sh";
  const fs::path out = scratch.path() / "out";
  std::ofstream(file) << "set -u\n"
                         "mount -t tmpfs -o mode=1777 none /var/tmp || exit 90\n"
                         "mount -t tmpfs -o mode=1777 none /dev/shm || exit 90\n"
                         "as() { u=$1; shift; if [ \"$u\" = 0 ]; then \"$@\"; else setpriv --reuid=$u --regid=$u "
                         "--clear-groups --inh-caps=-all \"$@\"; fi; }\n"
                      << "cli() { u=$1; shift; as $u env -u XDG_RUNTIME_DIR " << BASHEXEC_CLI_PATH << " \"$@\"; }\n"
                      << "xcli() { u=$1; shift; if [ \"$u\" = 0 ]; then exec env -u XDG_RUNTIME_DIR "
                      << BASHEXEC_CLI_PATH << " \"$@\"; fi; exec setpriv --reuid=$u --regid=$u --clear-groups "
                      << "--inh-caps=-all env -u XDG_RUNTIME_DIR " << BASHEXEC_CLI_PATH << " \"$@\"; }\n"
                      << "printed_path() { tail -1 | sed 's/.*full output: //; s/]$//'; }\n"
                      << "ns=$(stat -Lc %i /proc/self/ns/pid)\n"
                      << "cd /\n"
                      << script;
  const int status = std::system(
      fmt::format("unshare --mount --propagation private sh {} >{} 2>&1", file.string(), out.string()).c_str());
  const std::string printed = slurp(out);
  INFO(printed);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) != 90);
  return printed;
}

/// Why the attacks cannot be played here with `uid` as bashexec's user:
/// no second user or mount namespace, or a CLI `uid` cannot run (a build
/// tree others cannot search stops nobody) or sandbox.
std::optional<std::string> cli_missing_for(int uid) {
  if (auto missing = private_temp_missing()) return missing;
  if (uid == 0) return std::nullopt;
  const std::string seen = in_private_temp(fmt::format("cd /var/tmp && cli {} run -- echo usable 2>&1\n", uid));
  if (seen != "usable\n") return fmt::format("uid {} cannot run bashexec here: {}", uid, seen);
  return std::nullopt;
}

/// The attacker of `victim`: nobody attacks root, a third user nobody.
int attacker_of(int victim) { return victim == 0 ? nobody : stranger; }

}  // namespace

#ifdef BASHEXEC_CLI_PATH
TEST_CASE("Beyond: run never follows, chmods or prunes a kept-spill directory another user planted",
          "[shared-temp][cli][security]") {
  const int victim = GENERATE(0, nobody);
  const struct {
    int victim;
    int attacker;
  } who{victim, attacker_of(victim)};
  SKIP_UNLESS(cli_missing_for(who.victim));
  INFO("victim uid " << who.victim << ", attacker uid " << who.attacker);
  // The victim's project: 0755 with an entry two days old, which a prune
  // of kept spills (24 h) would remove if it were reached through the link.
  const std::string setup = fmt::format(
      "mkdir -p /var/tmp/proj/old && touch -d '2 days ago' /var/tmp/proj/old && chmod 0755 /var/tmp/proj && "
      "chown -R {0} /var/tmp/proj\n"
      "for name in bashexec-run bashexec-run-{0}; do as {1} ln -s /var/tmp/proj /var/tmp/$name; done\n",
      who.victim, who.attacker);
  const std::string check = "echo mode=$(stat -c %a /var/tmp/proj); ls /var/tmp/proj\n";

  SECTION("links in /var/tmp: the output is kept in the victim's own directory under /dev/shm") {
    const std::string seen =
        in_private_temp(setup + fmt::format("cli {} run -- 'seq 1 30000' 2>&1 | tail -1\n", who.victim) + check +
                        fmt::format("stat -c '%u %a' /dev/shm/bashexec-run-{}\n", who.victim));
    CHECK_THAT(seen, Catch::Contains(fmt::format("full output: /dev/shm/bashexec-run-{}/bashexec-kept-", who.victim)));
    CHECK_THAT(seen, Catch::Contains("mode=755\nold\n"));
    CHECK_THAT(seen, Catch::EndsWith(fmt::format("{} 700\n", who.victim)));
  }
  SECTION("links in /var/tmp and a foreign directory in /dev/shm: no path is printed, and stderr says why") {
    const std::string seen = in_private_temp(
        setup +
        fmt::format("for name in bashexec-run bashexec-run-{0}; do as {1} mkdir -m 0777 /dev/shm/$name; done\n"
                    "cli {0} run -- 'seq 1 30000' 2>/var/tmp/err | tail -1; cat /var/tmp/err\n",
                    who.victim, who.attacker) +
        check + "find /dev/shm -mindepth 2 | wc -l\n");
    CHECK_THAT(seen, Catch::Contains("full output: (unavailable)"));
    CHECK_THAT(seen, Catch::Contains(fmt::format("/var/tmp/bashexec-run-{}: a symbolic link", who.victim)));
    CHECK_THAT(seen, Catch::Contains(fmt::format("/dev/shm/bashexec-run-{}: owned by uid {}", who.victim, who.attacker)));
    CHECK_THAT(seen, Catch::EndsWith("mode=755\nold\n0\n"));  // nothing written into the attacker's directories
  }
}
#endif

#ifdef BASHEXEC_CLI_PATH
TEST_CASE("Beyond: without XDG_RUNTIME_DIR an ordinary user's run keeps its output beside root's kept directory",
          "[shared-temp][cli]") {
  SKIP_UNLESS(cli_missing_for(nobody));
  // Root's run comes first and keeps its own directory in /var/tmp.
  const std::string seen = in_private_temp(fmt::format(
      "cli 0 run -- 'seq 1 30000' | tail -1 | grep -c /var/tmp/\n"
      "path=$(cli {0} run -- 'seq 1 30000' 2>/var/tmp/err | printed_path)\n"
      "echo \"$path\" | grep -c '^/var/tmp/bashexec-run-{0}/'; as {0} wc -l < \"$path\"; cat /var/tmp/err\n",
      nobody));
  CHECK(seen == "1\n1\n30000\n");
}
#endif

TEST_CASE("Beyond: a spill parent that another user owns is refused: the path is withheld and nothing is written",
          "[shared-temp][security]") {
  SKIP_UNLESS(::geteuid() == 0 ? std::nullopt : std::optional<std::string>("needs root to give a directory away"));
  temp_dir parent;
  REQUIRE(::chown(parent.path().c_str(), nobody, nobody) == 0);
  REQUIRE(::chmod(parent.path().c_str(), 0755) == 0);  // nobody may swap what root makes in it
  bashexec::executor_config config = test_support::fast_config();
  config.spill_parent = parent.path();
  bashexec::local_executor executor(config);
  const auto result = executor.run(executor.resolve({.command = "seq 1 30000"}));
  CHECK(result.out.truncated);
  CHECK_FALSE(result.out.spill_path);
  CHECK(fs::is_empty(parent.path()));
}

TEST_CASE("Beyond: a spill directory is used through its descriptor: a swapped path sends no spill file elsewhere",
          "[shared-temp][security]") {
  temp_dir parent;
  temp_dir elsewhere;
  bashexec::detail::spill_directory spills(parent.path(), std::uint64_t{1} << 20, false);
  const auto first = spills.create_file("stdout").second;
  const fs::path dir = first.parent_path();
  // The owner of a shared parent could do this between two spills.
  fs::rename(dir, parent.path() / "moved");
  fs::create_directory_symlink(elsewhere.path(), dir);
  const auto second = spills.create_file("stderr").second;
  CHECK(fs::is_empty(elsewhere.path()));
  CHECK(fs::exists(parent.path() / "moved" / second.filename()));
  CHECK(fs::exists(parent.path() / "moved" / first.filename()));
}

#ifdef BASHEXEC_CLI_PATH
TEST_CASE("Beyond: with / as the working directory run works in every mode, and its spill files stay read-only",
          "[shared-temp][cli]") {
  const int victim = GENERATE(0, nobody);
  SKIP_UNLESS(cli_missing_for(victim));
  INFO("as uid " << victim);
  const std::string plant_in_session_logs =
      R"j({"id":1,"tool":"bash","args":{"command":"touch /var/tmp/bashexec-sessions-*/planted; )j"
      R"j(echo planted $(ls /var/tmp/bashexec-sessions-*/ | grep -c planted)","description":"d"}})j";
  const std::string seen = in_private_temp(fmt::format(
      "for mode in read-only workspace-write danger-full-access; do cli {0} run --mode $mode -- echo hi; echo \"$mode "
      "$?\"; done\n"
      "first=$(cli {0} run --mode workspace-write -- 'seq 1 30000' | printed_path)\n"
      "second=$(cli {0} run --mode workspace-write -- 'seq 1 20000' | printed_path)\n"
      "cli {0} run --mode workspace-write -- \"echo x >> $first; echo x >> $second; rm -f $first $second; "
      "rm -rf $(dirname $second); touch $(dirname $(dirname $first))/planted\" >/dev/null 2>&1\n"
      "wc -l < $first; wc -l < $second; ls $(dirname $(dirname $first)) | grep -c planted\n"
      // serve's session logs too.
      // The output file exists before the wait reads it: the server's own
      // redirection opens it only once a writer opened the FIFO.
      "mkfifo /var/tmp/in; : >/var/tmp/out; xcli {0} serve --mode workspace-write < /var/tmp/in > /var/tmp/out & pid=$!\n"
      "exec 3>/var/tmp/in; echo '{1}' >&3\n"
      "while ! grep -q planted /var/tmp/out; do sleep 0.05; done; exec 3>&-; wait $pid; "
      "grep -o 'planted [0-9]*' /var/tmp/out\n",
      victim, plant_in_session_logs));
  CHECK(seen == "hi\nread-only 0\nhi\nworkspace-write 0\nhi\ndanger-full-access 0\n30000\n20000\n0\nplanted 0\n");
}

TEST_CASE("Beyond: a killed serve's session and spill directories are swept by the next start, a live one's kept",
          "[shared-temp][cli]") {
  const int victim = GENERATE(0, nobody);
  SKIP_UNLESS(cli_missing_for(victim));
  INFO("as uid " << victim);
  const std::string call = R"({"id":1,"session":"s","tool":"bash","args":{"command":"seq 1 30000","description":"d"}})";
  // Each server answers a call that spills. A SIGKILLed one leaves its
  // directories; the next start (serve or run) sweeps them, never a live one's.
  const std::string seen = in_private_temp(fmt::format(
      "exec 2>/var/tmp/errors\n"  // the shell's own "Killed" notes are no output of ours
      "serve() {{ mkfifo /var/tmp/in-$1; : >/var/tmp/out-$1; xcli {0} serve < /var/tmp/in-$1 > /var/tmp/out-$1 & pid=$!; "
      "eval \"exec $2>/var/tmp/in-$1\"; echo '{1}' >&$2; "
      "while ! grep -q 'full output' /var/tmp/out-$1; do sleep 0.05; done; }}\n"
      "count() {{ echo $(ls /var/tmp | grep -c '^bashexec-sessions-') $(ls /var/tmp | grep -c '^bashexec-spill-'); }}\n"
      "serve first 3; kill -9 $pid; wait $pid; exec 3>&-; count\n"
      "serve second 4; count\n"
      "cli {0} run -- true >/dev/null; count\n"
      "kill -9 $pid; wait $pid; exec 4>&-; cli {0} run -- true >/dev/null; count\n"
      "serve third 5; exec 5>&-; wait $pid; echo $?; count; grep -v Killed /var/tmp/errors\n",
      victim, call));
  CHECK(seen == "1 1\n1 1\n1 1\n0 0\n0\n0 0\n");
}

TEST_CASE("Beyond: run bounds what ended runs keep — a day at most, 1 GiB in all, oldest first, a running one's kept",
          "[shared-temp][cli]") {
  const int victim = GENERATE(0, nobody);
  SKIP_UNLESS(cli_missing_for(victim));
  INFO("as uid " << victim);
  // Ended runs' directories carry the stamp of a process that is gone; the
  // running one's that of the script's shell. Sparse files: no real bytes.
  const std::string seen = in_private_temp(fmt::format(
      "dead=$(sh -c 'echo $$'); live=\"$ns.$$.$(cut -d' ' -f22 /proc/$$/stat)\"\n"
      "kept=/var/tmp/bashexec-run-{0}; as {0} mkdir -m 0700 $kept\n"
      "make() {{ as {0} mkdir $kept/bashexec-kept-$1-x && as {0} truncate -s $2 $kept/bashexec-kept-$1-x/f && "
      "as {0} touch -d \"$3\" $kept/bashexec-kept-$1-x; }}\n"
      "make $ns.$dead.1 10 '2 days ago'\n"        // too old
      "make $live 700M '5 hours ago'\n"           // running: stays, counts
      "make $ns.$dead.2 300M '4 hours ago'\n"     // oldest ended: goes for the total
      "make $ns.$dead.3 200M '3 hours ago'\n"
      "make $ns.$dead.4 100M '2 hours ago'\n"
      "cli {0} run -- true >/dev/null\n"
      "for s in $ns.$dead.1 $live $ns.$dead.2 $ns.$dead.3 $ns.$dead.4; do "
      "[ -d $kept/bashexec-kept-$s-x ] && printf y || printf n; done\n",
      victim));
  CHECK(seen == "nynyy");
}
#endif

TEMPLATE_TEST_CASE("Beyond: a spill directory under a writable root (a workspace of /) is read-only to workspace-write "
                   "commands",
                   "[shared-temp][spill]", test_support::bwrap_executor, test_support::landlock_executor) {
  SKIP_UNLESS(test_support::backend_missing<TestType>());
  if constexpr (std::is_same_v<TestType, test_support::landlock_executor>)
    if (!bashexec::landlock::can_bind_read_only()) {
      WARN("skipped: Landlock cannot bind read-only here (not privileged, no user namespace): such a spawn is "
           "refused, see the userns-refused run");
      return;
    }
  temp_dir parent;  // under /var/tmp, so under the workspace
  bashexec::executor_config config = test_support::fast_config();
  config.spill_parent = parent.path();
  config.sandbox.default_mode = bashexec::sandbox_mode::workspace_write;
  config.sandbox.workspace_root = "/";
  TestType executor(config);
  const auto big = executor.run(executor.resolve({.command = "seq 1 30000"}));
  REQUIRE(big.out.spill_path);
  const std::string path = big.out.spill_path->string();
  const auto attempt = executor.run(executor.resolve(
      {.command = fmt::format("echo x >> {0}; rm -f {0}; mv {0} {1}/moved; echo ok > {1}/beside; echo ran", path,
                              big.out.spill_path->parent_path().string())}));
  CHECK_THAT(attempt.out.text, Catch::Contains("ran"));
  const std::string kept = slurp(*big.out.spill_path);
  CHECK(std::count(kept.begin(), kept.end(), '\n') == 30000);
  CHECK(kept.ends_with("29999\n30000\n"));
  CHECK_FALSE(fs::exists(big.out.spill_path->parent_path() / "beside"));
  CHECK(fs::exists(parent.path()));  // the parent itself stays the workspace's
}

// Hidden: run by tests/run_userns_refused.sh (CTest test_shared_temp_userns_refused),
// where no user namespace can be made and no capability is held.
TEST_CASE("Beyond: where Landlock cannot bind a spill directory under a writable root read-only, the spawn is refused",
          "[.userns-refused][landlock]") {
  SKIP_UNLESS(test_support::backend_missing<test_support::landlock_executor>());
  REQUIRE(std::getenv("BASHEXEC_REFUSING_LIMIT") != nullptr);  // only meaningful in that setting
  REQUIRE_FALSE(bashexec::landlock::can_bind_read_only());
  temp_dir parent;
  bashexec::executor_config config = test_support::fast_config();
  config.spill_parent = parent.path();
  config.sandbox.workspace_root = "/";
  test_support::landlock_executor executor(config);
  const auto request = [&](bashexec::sandbox_mode mode) {
    return executor.resolve({.command = "echo ran", .mode = mode});
  };
  CHECK(executor.run(request(bashexec::sandbox_mode::read_only)).out.text == "ran\n");  // nothing writable
  CHECK_THROWS_WITH(executor.run(request(bashexec::sandbox_mode::workspace_write)),
                    Catch::Contains("the spill directory " + parent.str()) &&
                        Catch::Contains("Landlock cannot bind it read-only here"));
}

TEST_CASE("Beyond: an owner stamp names this process while it lives and a finished one as gone", "[shared-temp]") {
  using bashexec::detail::owner_gone;
  const std::string mine = bashexec::detail::owner_stamp();
  CHECK_FALSE(owner_gone(mine));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const std::string ns = mine.substr(0, mine.find('.'));
  CHECK(owner_gone(fmt::format("{}.{}.1", ns, child)));
  CHECK(owner_gone(fmt::format("{}.{}.1", ns, ::getpid())));  // this pid, another start time
  CHECK_FALSE(owner_gone(fmt::format("1{}.{}.1", ns, child)));  // another pid namespace: never judged
  CHECK_FALSE(owner_gone("garbage"));
}
