// The linear-attention experiment (issue 14): the INT4/FP8 smoothing proposal for chunkwise GLA,
// its hypotheses turned into measurements on synthetic and captured data with random gates.
//
// run_linear is the whole program (exp_linear's main calls it; a `lowbit run linear`
// dispatcher can call it with its own argv, argv[0] being the command's name): it parses the
// options (--help lists them), runs the selected experiments over every data head and seed,
// and writes OUT/metrics.csv (experiment,variant,dataset,head,metric,value), OUT/provenance.json
// and OUT/table.md. Returns the exit status: 0, 1 on an error (printed), 2 on bad options.
#pragma once

namespace lowbit::experiments {

int run_linear(int argc, char** argv);

}  // namespace lowbit::experiments
