// exp_linear: the linear-attention experiment as a program (run_linear.hpp says what it does).
#include "experiments/linear/run_linear.hpp"

int main(int argc, char** argv) { return lowbit::experiments::run_linear(argc, argv); }
