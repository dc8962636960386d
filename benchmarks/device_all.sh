#!/usr/bin/env bash
# Run every device benchmark on whatever CUDA GPU this machine has, each under its own time
# limit so one slow script cannot cost the others their results (the scripts are named for the
# H100 they were written on; nothing in them is H100-specific). Results and logs go to $1
# (default: ./device_out), with the GPU's identity and limits from nvidia-smi.
#     bash benchmarks/device_all.sh OUTDIR
set -u
out=${1:-device_out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
nvidia-smi --query-gpu=name,power.limit,power.max_limit,clocks.max.sm,clocks.max.mem,memory.total,driver_version,temperature.gpu \
  --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > "$out/torch.txt" 2>&1
cd "$(dirname "$0")"
for spec in power:150 transformer:100 inference:100 step_power:60 burst:60; do
  name=${spec%%:*}; limit=${spec##*:}
  start=$(date +%s)
  PYTHONUNBUFFERED=1 timeout "$limit" python3 "device_h100_$name.py" --out "$out/$name.json" > "$out/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - start )) s"
done
PYTHONUNBUFFERED=1 timeout 240 python3 device_h100_kernels.py --out "$out/kernels.json" > "$out/kernels.log" 2>&1; echo "kernels rc=$?"
PYTHONUNBUFFERED=1 timeout 240 python3 device_h100_breakdown.py --out "$out/breakdown.json" > "$out/breakdown.log" 2>&1; echo "breakdown rc=$?"
