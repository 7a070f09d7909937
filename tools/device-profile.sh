#!/usr/bin/env bash
# Hardware-counter profile of the decode kernels on an NVIDIA GPU (Nsight
# Compute), run after tools/device-check.sh has built build/device:
#   SKIP_TESTS=1 tools/device-check.sh tools/device-profile.sh ['SHAPE|REGEX'...]
# Each job is 'SHAPE|REGEX': a bench shape and the demangled kernel names to
# profile in it (one launch each after PROFILE_SKIP; speed of light, occupancy, scheduler and warp-state
# statistics, memory workload, instruction mix), clocks left alone. The
# reports go to $OUT/ncu.txt.
set -uo pipefail
OUT=${OUT:-build/device-logs}
B=${BUILD_DIR:-$PWD/build/device}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "device-profile: ncu not found" >&2; exit 1; }
# Default: IQ3_S and IQ4_NL 4096x14336 at n_tokens 1 and 8, and the MoE
# gate-up / down at n_tokens 1. Each job is 'SHAPE|KERNEL REGEX'.
[ $# -gt 0 ] || set -- \
  'mmvq iq3_s 4096 14336|st_mmvq_default_kernel<.int.21, .int.32, .int.1,' \
  'mmvq iq3_s 4096 14336|st_mmvq_default_kernel<.int.21, .int.32, .int.8,' \
  'mmvq iq4_nl 4096 14336|st_mmvq_default_kernel<.int.20, .int.32, .int.1,' \
  'expert iq3_s iq4_nl 2560 640 1|st_gate_up_kernel' \
  'expert iq3_s iq4_nl 2560 640 1|st_down_fused'
: > "$OUT/ncu.txt"
for job in "$@"; do
  shape=${job%%|*}; kre=${job#*|}
  echo "=== $shape :: $kre" >> "$OUT/ncu.txt"
  "$NCU" --clock-control none --kernel-name-base demangled --kernel-name "regex:$kre" \
    --launch-skip "${PROFILE_SKIP:-5}" --launch-count "${PROFILE_COUNT:-1}" \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section InstructionStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_short_scoreboard,smsp__average_warp_latency_issue_stalled_lg_throttle,smsp__average_warp_latency_issue_stalled_mio_throttle,smsp__average_warp_latency_issue_stalled_wait,smsp__average_warp_latency_issue_stalled_math_pipe_throttle \
    "$B/tools/tune_decode" bench --quick --no-suite --shape "$shape" >> "$OUT/ncu.txt" 2>&1
  echo "ncu '$shape' rc=$?"
done
