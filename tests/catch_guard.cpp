// A test case that passes, named with a ';' on purpose: catch_discover_tests splits the name
// into two ctest entries ("...split here" and " and here"), neither of which matches this test
// case. With --warn NoTests (lowbit_discover_tests) each entry exits 2; tests/CMakeLists.txt
// registers them as expected to fail, so a run without the guard fails. No other test case may
// have a ';' in its name.
#include <catch2/catch.hpp>

TEST_CASE("a name ctest splits here; and here", "[guard]") { CHECK(1 + 1 == 2); }
