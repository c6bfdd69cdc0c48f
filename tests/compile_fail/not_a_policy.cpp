// Must NOT compile: a type that does not model the output-policy concept.
#include <bashexec/policies.hpp>

struct not_an_output_policy {};
using broken = bashexec::policies<bashexec::collect_with<not_an_output_policy>>;
int main() { return sizeof(broken::output); }
