# Sourced by the GPU scripts: the GPU's SM clock, power draw, temperature and throttle reasons every
# 200 ms into a CSV while a timed step runs. At its power cap an H100 lowers its clock, which moves
# every timing (results/bench_attention/README.md), so each timing run keeps its record.
power_log_start() {  # $1: the CSV
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 200 > "$1" 2>&1 &
  POWER_LOG_PID=$!
}
power_log_stop() {
  [[ -n ${POWER_LOG_PID:-} ]] && kill "$POWER_LOG_PID" 2> /dev/null
  POWER_LOG_PID=
}
