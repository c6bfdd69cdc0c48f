// Must NOT compile: a policy kind picked twice is ambiguous.
#include <bashexec/policies.hpp>
#include <bashexec/output/head_tail.hpp>

using twice = bashexec::policies<bashexec::collect_with<bashexec::tail_spill>, bashexec::collect_with<bashexec::head_tail>>;
int main() { return sizeof(twice::output); }
