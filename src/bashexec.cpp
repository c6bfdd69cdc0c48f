// The one translation unit of bashexec::compiled: every non-template function
// body of the library (see <bashexec/detail/linkage.hpp>).
#include <bashexec/src.hpp>
