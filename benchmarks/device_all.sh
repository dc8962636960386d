#!/usr/bin/env bash
# Run every device benchmark on whatever CUDA GPU this machine has, each under its own time
# limit so one slow script cannot cost the others their results (the scripts are named for the
# H100 they were written on; nothing in them is H100-specific). Results and logs go to $1
# (default: ./device_out), with the GPU's identity and limits from nvidia-smi. Exits nonzero
# when any script failed or ran out of time (the others' results are kept).
#     bash benchmarks/device_all.sh OUTDIR
set -u
out=${1:-device_out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
nvidia-smi --query-gpu=name,power.limit,power.max_limit,clocks.max.sm,clocks.max.mem,memory.total,driver_version,temperature.gpu \
  --format=csv > "$out/nvidia_smi.csv" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > "$out/torch.txt" 2>&1
cd "$(dirname "$0")"
failed=0
for spec in power:150 transformer:100 inference:100 step_power:60 burst:60 kernels:240 \
            breakdown:240 decode_profile:200; do
  name=${spec%%:*}; limit=${spec##*:}
  start=$(date +%s)
  PYTHONUNBUFFERED=1 timeout "$limit" python3 "device_h100_$name.py" --out "$out/$name.json" > "$out/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - start )) s"
  [ "$rc" -eq 0 ] || failed=1
done
exit "$failed"
