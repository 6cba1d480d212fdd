// Subcommands of the `lowbit` program. Each add_* function registers one or more subcommands;
// their actions store the process exit code in `exit_code`.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace lowbit::cli {

void add_format_commands(CLI::App& app, int& exit_code);   // formats, format
void add_convert_command(CLI::App& app, int& exit_code);   // convert
void add_tour_command(CLI::App& app, int& exit_code);      // tour
void add_verify_vectors_command(CLI::App& app, int& exit_code);  // verify-vectors
void add_run_commands(CLI::App& app, int& exit_code);            // run, plot
// attention; `command` (the command line) goes into the --metrics-json record
void add_attention_command(CLI::App& app, int& exit_code, std::string command);
#if defined(LOWBIT_HAVE_KERNELS)
void add_verify_cvt_command(CLI::App& app, int& exit_code);  // verify-cvt (GPU)
void add_verify_gpu_command(CLI::App& app, int& exit_code);  // verify-gpu (GPU)
void add_verify_exp2_command(CLI::App& app, int& exit_code);  // verify-exp2 (GPU)
#endif

}  // namespace lowbit::cli
