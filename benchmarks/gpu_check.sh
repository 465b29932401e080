#!/usr/bin/env bash
# The GPU check, one command (under 8 minutes on one H100):
#   1. every target × its default attack on the device, compared with the CPU within the stated
#      tolerance (benchmarks/device_check.py: |Δscore| ≤ 1e-6 + 1e-3·median|score|, same trials);
#   2. benchmarks/throughput.py on Cora (every row, batched and batch=1, with the noise-draw floor);
#   3. throughput.py's mechanism-level rows on the largest csbm graph that fits: the largest n in
#      10^6, 3·10^5, 10^5, 3·10^4 (at most --max-nodes) whose graph and a batch of releases take at
#      most half the device's free memory.
# Usage: benchmarks/gpu_check.sh [--device cuda|cpu] [--out DIR] [--trials N] [--max-nodes N] [--quick]
# (--quick: 16 trials a device-check run, throughput with 64 / 16 / 4 trials: for a slow CPU)
# With --device cpu (no GPU lent) the same steps run on the CPU: step 1 then checks that a rerun
# is bitwise equal. Each step's table goes to DIR (default results/gpu-check-<device>) and stdout;
# exit status 1 when a step fails.
set -uo pipefail
cd "$(dirname "$0")/.."
DEVICE=cuda OUT="" TRIALS=32 MAX_NODES=1000000 TP="--trials 256 --trials-one 64 --full-trials 16" TPL="--trials 64 --trials-one 16"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --trials) TRIALS="$2"; shift 2 ;;
    --max-nodes) MAX_NODES="$2"; shift 2 ;;
    --quick) TRIALS=16 TP="--trials 64 --trials-one 16 --full-trials 8" TPL="--trials 16 --trials-one 8"; shift ;;
    *) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-results/gpu-check-$DEVICE}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export AUDIT_DATA_DIR="${AUDIT_DATA_DIR:-$(cd .. && pwd)/shared/datasets}"
status=0
start=$(date +%s)
step() {  # step NAME COMMAND...: run, tee its output to OUT/NAME.md, remember a failure
  local name="$1"; shift
  echo "== $name: $*" >&2
  local t=$(date +%s)
  "$@" | tee "$OUT/$name.md" || status=1
  echo "== $name: $(( $(date +%s) - t )) s" >&2
}
{ echo "device $DEVICE; $(python -c 'import torch; print("torch", torch.__version__, "cuda" if torch.cuda.is_available() else "no cuda", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")')";
  echo "cpus $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"; } | tee "$OUT/machine.txt"

step device_check python benchmarks/device_check.py --device "$DEVICE" --trials "$TRIALS"
step throughput_cora python benchmarks/throughput.py --dataset cora --devices "$DEVICE" --no-backends $TP
LARGEST=$(python - "$DEVICE" "$MAX_NODES" <<'PY'
import sys
import torch
from graphs.memory import available_memory
device, cap = sys.argv[1], int(sys.argv[2])
free = torch.cuda.mem_get_info()[0] if device.startswith("cuda") else available_memory()
# the graph (x: 32 floats, ~2·8 directed int64 edges a node) and a batch of 16 releases of GAP's
# 2 hops × 16 dims in float32, twice over for the scores' working copies
per_node = 32 * 4 + 2 * 8 * 16 + 2 * 16 * 2 * 16 * 4
fits = [n for n in (1_000_000, 300_000, 100_000, 30_000) if n <= cap and n * per_node <= free / 2]
print(f"csbm:n={fits[0] if fits else 10_000}")
PY
)
echo "largest graph that fits: $LARGEST" | tee -a "$OUT/machine.txt"
step throughput_largest python benchmarks/throughput.py --dataset "$LARGEST" --devices "$DEVICE" --no-backends \
  --only "gaussian / mechanism,gap / mechanism,caribou / mechanism" $TPL
echo "gpu_check: $(( $(date +%s) - start )) s, tables in $OUT" >&2
exit $status
