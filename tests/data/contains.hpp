// doctest::Contains for messages the data tests build at run time.
#pragma once

#include <doctest/doctest.h>

#include <string>

namespace ms_test {

/// doctest::Contains for a message built at run time (it takes a doctest::String).
inline doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

}  // namespace ms_test
