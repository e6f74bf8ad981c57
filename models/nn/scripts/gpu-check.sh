#!/usr/bin/env bash
# The GPU check of the `cuda` build: what to run on a machine with an NVIDIA GPU and the
# binaries models/nn/scripts/cuda-build.sh made (target/cuda-bin/hgp and gpu-tests, or their
# archive target/cuda-bin/hgp-cuda.tar.xz, unpacked here into OUT_DIR/bin). Inside
# 8 minutes on an H100 or H200:
#
#   1. nvidia-smi, and the CUDA libraries the binaries load (the GPU machine's toolkit, or
#      the NVIDIA wheels of its Python);
#   2. the engines' agreement: candle on CUDA against the fused CPU engine on every paper
#      network (logistic, Table 5 CNN, LeNet-5, CIFAR CNN, MobileNet-v2, the LSTM), cost,
#      gradient and HVP in f32, each within its stated tolerance (tests/gpu.rs);
#   3. the time of a gradient and of an HVP at batch 128: MobileNet-v2, the LSTM at windows
#      of 80 and 200, on the GPU and on the CPU's fused engine in the same run;
#   4. `hgp personalize --dataset cifar10 --model mobilenet-v2 --device cuda` on generated
#      CIFAR-10 files, SGP alone at two step counts: the difference of their times over the
#      difference of their steps is the time of one SGP step (loading and evaluation cancel).
#
# Usage: models/nn/scripts/gpu-check.sh [BINARIES [OUT_DIR]]
#   BINARIES  the folder of the binaries, or their .tar.xz [target/cuda-bin]
#   OUT_DIR   where the log and the runs go [$OUT, or target/gpu-check]
# Exit status: 0 when every step ran and passed, else the number of steps that did not.
set -uo pipefail

binaries="${1:-target/cuda-bin}"
out="${2:-${OUT:-target/gpu-check}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
exec > >(tee "$out/gpu-check.log") 2>&1
start=$(date +%s)
failed=0
step() { printf '\n== [%3d s] %s\n' $(($(date +%s) - start)) "$*"; }
fail() { echo "FAILED: $*"; failed=$((failed + 1)); }

if [[ -f "$binaries" ]]; then
  bin="$(mktemp -d)"
  trap 'rm -rf "$bin"' EXIT
  python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' \
    "$binaries" "$bin" || { echo "gpu-check: cannot unpack $binaries"; exit 1; }
else
  bin="$(cd "$binaries" && pwd)"
fi

for b in hgp gpu-tests; do
  [[ -x "$bin/$b" ]] || { echo "gpu-check: no $bin/$b: run models/nn/scripts/cuda-build.sh first"; exit 1; }
done

step "1. the GPU and the CUDA libraries"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || fail "nvidia-smi"
# The libraries linked (libcublas, libcublasLt, libcurand, libnvrtc, libcudart): the toolkit's
# folders, then those of the NVIDIA wheels in the machine's Python.
paths=()
while IFS= read -r d; do paths+=("$d"); done < <(python3 -c 'import nvidia, os
for p in nvidia.__path__:
    for root, _, files in os.walk(p):
        if os.path.basename(root) == "lib" and any(".so" in f for f in files):
            print(root)' 2>/dev/null)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && paths+=("$d")
done
[[ -n "${LD_LIBRARY_PATH:-}" ]] && paths+=("$LD_LIBRARY_PATH")
LD_LIBRARY_PATH="$(IFS=:; echo "${paths[*]}")"
export LD_LIBRARY_PATH
ldd "$bin/hgp" | grep -E 'libcu|nvrtc' | sed 's/^/   /'
if ldd "$bin/hgp" | grep -q 'not found'; then
  fail "a CUDA library of the build is missing here (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
  exit "$failed"
fi
export CANDLE_GRAD_DO_NOT_DETACH=1

step "2. candle on CUDA against the fused CPU engine, f32, every paper network"
timeout 240 "$bin/gpu-tests" --exact the_gpu_agrees_with_the_cpu_on_every_paper_network \
  --nocapture --test-threads 1 || fail "the engines' agreement on the GPU"

step "3. gradient and HVP at batch 128: GPU (candle) and CPU (fused engine)"
HGP_GPU_RUNS=5 timeout 240 "$bin/gpu-tests" --exact time_gradients_and_hvps_on_the_gpu_and_the_cpu \
  --ignored --nocapture --test-threads 1 || fail "the timing"

step "4. hgp personalize --dataset cifar10 --model mobilenet-v2 --device cuda"
data="$out/cifar-10-batches-bin"
python3 - "$data" <<'PY' || fail "writing the CIFAR-10 files"
import os, random, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
r = random.Random(0)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(os.path.join(d, name), "wb") as f:
        for _ in range(200):  # 200 records a file: a label byte, then 3 x 32 x 32 pixels
            label = r.randrange(10)
            f.write(bytes([label]) + bytes(min(255, max(0, int(r.gauss(60 + 15 * label, 40)))) for _ in range(3072)))
PY
seconds=()
for steps in 10 30; do
  t0=$EPOCHREALTIME
  timeout 150 "$bin/hgp" personalize --dataset cifar10 --data-dir "$data" --model mobilenet-v2 \
    --device cuda --methods sgp --networks fc --images 1000 --clients 4 \
    --batch 32 --sgp-steps "$steps" --seed 0 --json --out "$out/personalize-$steps" \
    >"$out/personalize-$steps.json" || fail "personalize with --sgp-steps $steps"
  seconds+=("$(python3 -c "print(round($EPOCHREALTIME - $t0, 3))")")
  echo "   --sgp-steps $steps: $(head -c 300 "$out/personalize-$steps.json") (${seconds[-1]} s)"
done
if ((${#seconds[@]} == 2)); then
  echo "   time of one SGP step (4 clients, MobileNet-v2 gradients at batch 32, on the GPU):" \
    "$(python3 -c "print(round((${seconds[1]} - ${seconds[0]}) / 20, 4))") s"
fi
"$bin/hgp" personalize --device cuda --help >/dev/null || fail "hgp personalize --help"

step "done: $failed step(s) failed"
exit "$failed"
