#!/usr/bin/env bash
# The [C]-schedule regularised arm of the HE study (docs/he_study/README.md) as one
# `scripts/he_study.py` process per model, PAR at a time, longest models first, on one machine.
#
#   bash scripts/he_study_parallel.sh OUT DEVICE PAR DEADLINE_S "SEEDS" ["LATER_SEEDS"]
#
# DEVICE: cpu or cuda (on cuda, an MPS daemon is started when `nvidia-cuda-mps-control` works, so
# the PAR small processes share the GPU instead of time-slicing it). Models of SEEDS run first,
# then those of LATER_SEEDS; no model starts with under 90 s left of DEADLINE_S, and a running
# one is stopped at the deadline (its result is simply missing; a rerun resumes from the
# finished `result.json` files). A model whose cuda run fails (not a timeout) is rerun on the CPU.
# Per model: OUT/models/NAME/result.json (he_study.py), OUT/logs/NAME.log, and one line of
# OUT/times.tsv (name, device, exit status, start, end). Then `he_study.py --out OUT
# --analyse-all ...` analyses whatever finished. HE_STUDY_EXTRA (e.g. "--epochs 1 --d-model 32")
# is appended to every he_study.py command line (its later options win): a quick dry run.
set -u
out=$1 device=$2 par=$3 deadline=$4 seeds=$5 later=${6:-}
mkdir -p "$out/logs"
end=$(( $(date +%s) + deadline ))

if [ "$device" = cuda ] && command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d && timeout 60 python3 -c \
      'import torch; torch.zeros(1, device="cuda"); print("MPS client ok")'; then
    echo "MPS daemon running"
  else
    echo quit | nvidia-cuda-mps-control 2>/dev/null
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    echo "MPS unavailable: processes time-slice the GPU"
  fi
fi

run_one() {  # noise seed lambda
  local n=$1 s=$2 lam=$3 left name rc dev=$device t0
  name="n$(printf %02d "$n")_s${s}_lam${lam}"
  left=$(( end - $(date +%s) ))
  [ "$left" -lt 90 ] && { echo "skip $name: ${left}s left"; return 0; }
  t0=$(date +%s)
  args=(--out "$out" --preset scan_he_paper --epochs 50 --max-samples 2000 --he-pairs 256
        --noise "$n" --seeds "$s" --he-lambda "$lam" ${HE_STUDY_EXTRA:-})
  OMP_NUM_THREADS=1 PROBEKIT_PROGRESS=0 timeout -k 5 "$left" \
    python3 scripts/he_study.py "${args[@]}" --device "$dev" > "$out/logs/$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$dev" != cpu ]; then
    dev=cpu left=$(( end - $(date +%s) ))
    OMP_NUM_THREADS=1 PROBEKIT_PROGRESS=0 timeout -k 5 "$left" \
      python3 scripts/he_study.py "${args[@]}" --device cpu >> "$out/logs/$name.log" 2>&1
    rc=$?
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$dev" "$rc" "$t0" "$(date +%s)" >> "$out/times.tsv"
  echo "$name on $dev: exit $rc after $(( $(date +%s) - t0 )) s"
}
export -f run_one
export out device end

tasks() {  # regularised before plain, high noise before low: the longest models first
  local group lam n s
  for group in "$seeds" "$later"; do
    for lam in 0.2 0; do for n in 15 12 9 6 3 0; do for s in $group; do
      echo "$n $s $lam"
    done; done; done
  done
}
tasks | xargs -P "$par" -L 1 bash -c 'run_one "$@"' _
echo "finished: $(ls "$out"/models/*/result.json 2>/dev/null | wc -l) result files"
