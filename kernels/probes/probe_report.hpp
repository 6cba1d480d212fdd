// What the SFU probes (sm90_*_structure.cu) share: a failed CUDA call ends the program, naming it
// and the step; a Report prints each finding and keeps it for OUT_DIR/<program>.txt; write_bytes
// writes a table (and says so in the report), or ends the program naming the file.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace lowbit::probes {

struct Report {
  std::string program;  // e.g. "sm90_rcp_structure"
  std::string text;

  void check(cudaError_t e, const char* what) const {
    if (e == cudaSuccess) return;
    std::fprintf(stderr, "%s: %s: %s\n", program.c_str(), what, cudaGetErrorString(e));
    std::exit(1);
  }
  void say(const std::string& line) {
    std::printf("%s\n", line.c_str());
    text += line + "\n";
  }
  void write_bytes(const std::string& path, const void* data, std::size_t bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    const bool written = f && std::fwrite(data, 1, bytes, f) == bytes;
    if (f) std::fclose(f);
    if (!written) {
      std::fprintf(stderr, "%s: cannot write %s\n", program.c_str(), path.c_str());
      std::exit(1);
    }
    say("wrote " + path);
  }
  // OUT_DIR/<program>.txt: every finding said.
  void save(const std::string& out_dir) const {
    if (FILE* f = std::fopen((out_dir + "/" + program + ".txt").c_str(), "w")) {
      std::fputs(text.c_str(), f);
      std::fclose(f);
    }
  }
};

}  // namespace lowbit::probes
