#include <exception>
#include <iostream>
#include <string>

#include "experiments/cli/command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"lowbit: bit-exact emulation of low-precision number formats and tensor-core arithmetic"};
  app.require_subcommand(1);
  int exit_code = 0;
  lowbit::cli::add_format_commands(app, exit_code);
  lowbit::cli::add_convert_command(app, exit_code);
  lowbit::cli::add_tour_command(app, exit_code);
  lowbit::cli::add_verify_vectors_command(app, exit_code);
  lowbit::cli::add_run_commands(app, exit_code);
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  lowbit::cli::add_attention_command(app, exit_code, command);
#if defined(LOWBIT_HAVE_KERNELS)
  lowbit::cli::add_verify_cvt_command(app, exit_code);
  lowbit::cli::add_verify_gpu_command(app, exit_code);
  lowbit::cli::add_verify_exp2_command(app, exit_code);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "lowbit: error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}
