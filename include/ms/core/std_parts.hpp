// ms/core/std_parts.hpp — std::function, std::mutex and std::lock_guard
// without the rest of <functional> and <mutex>.
//
// Stage: core. With libstdc++ in C++17 and later, <functional> also brings
// <unordered_map>, <bits/stl_algo.h> and the searchers, and <mutex> brings
// timed and recursive mutexes, call_once and <chrono>'s clocks; no ms header
// uses them, and they cost about 14 MB of the compiler's memory in every file
// that includes <ms/cell.hpp> (bench/compile_time.sh). libstdc++ defines the
// parts ms uses in the two headers below, which <functional> and <mutex>
// include; other standard libraries get the full headers.
#pragma once

#include <version>

#if defined(__GLIBCXX__) && __has_include(<bits/std_function.h>) && \
    __has_include(<bits/std_mutex.h>)
#include <bits/std_function.h>
#include <bits/std_mutex.h>
#else
#include <functional>
#include <mutex>
#endif
