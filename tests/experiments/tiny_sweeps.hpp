// The experiments of `lowbit run all` with their own sweeps shrunk (the options each adds to the
// common tiny sizes), for the tests that run them as programs.
#pragma once

#include <map>
#include <string>

namespace lowbit::testing {

inline const std::map<std::string, std::string> kTinySweeps{
    {"granularity", ""},
    {"smoothing", ""},
    {"pv-format", "--long-keys 0"},
    {"accumulator", "--lengths 256,512 --real-lengths 128 --queries 64 --long-heads 1"},
    {"fp4", ""},
    {"backward", ""},
    {"attribution", "--pipelines sage2-8b --sources q,p,output"},
    {"formats", "--qk-format int4,e3m4 --pv-format e4m3,int8"},
};

}  // namespace lowbit::testing
