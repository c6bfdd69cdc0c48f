// Must NOT compile: a spawn policy with settings of its own whose only
// constructor the executor cannot call (issue 26: it used to fail deep in
// detail/engine/spawn_step.hpp). The error must name the constructors the
// executor tries, at basic_executor.
#include <string>
#include <string_view>

#include <bashexec/basic_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>

struct configured_spawner : bashexec::fork_exec {
  static constexpr std::string_view name = "configured";
  struct config {
    int retries = 1;
    void validate() const {}
  };
  configured_spawner(const bashexec::executor_config&, const config&, const std::string& extra) { (void)extra; }
};

int main() {
  bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<configured_spawner>>> executor;
  (void)executor;
}
