// The single Catch2 main shared by every test executable.
#define CATCH_CONFIG_MAIN
// Test names are sentences; Catch2 2.13's console reporter asserts when a
// failing test's name has its first ": " past the console width (80).
#define CATCH_CONFIG_CONSOLE_WIDTH 300
#include <catch2/catch.hpp>
