#!/usr/bin/env bash
# Builds the `cuda` build of hgp on a machine with no GPU: the `hgp` program and the GPU test
# binary of hgp-nn (tests/gpu.rs), with `--features cuda`, for the GPU machine that
# models/nn/scripts/gpu-check.sh then runs them on.
#
# candle's CUDA kernels are compiled to PTX by nvcc at build time, and the program is linked
# against the CUDA libraries (cudarc's `dynamic-linking`). Both come here from the Python
# registry's NVIDIA wheels, at the CUDA version the GPU machine's driver runs (PTX newer than
# the driver cannot be loaded by it):
#
#   nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt, nvidia-cuda-cccl   nvcc and its headers
#   nvidia-cuda-runtime, nvidia-cublas, nvidia-curand, nvidia-cuda-nvrtc   the libraries linked
#
# What it writes, and nothing else (the system is left as it was found: no package manager,
# no pip cache, nothing outside the folders below):
#   target/cuda-tools/   the wheels, unpacked (`pip install --target`, about 1.3 GB), plus in
#                        its lib/: unversioned links to the libraries and a link-time stand-in
#                        for the driver's libcuda.so (the GPU machine's own libcuda.so.1 is the
#                        one loaded at run time; the stand-in only names its functions)
#   target/cuda/         the cargo target folder of this build
#   target/cuda-bin/     the two binaries, stripped (about 57 and 49 MiB: candle's kernels are
#                        in each), and hgp-cuda.tar.xz, the two in one xz archive (about
#                        16 MiB): what travels to the GPU machine (gpu-check.sh unpacks it)
#
# Settings (environment):
#   CUDA_VERSION       the GPU machine's CUDA, major.minor [13.0]
#   CUDA_COMPUTE_CAP   its compute capability, for the kernels built ahead of time [90: H100, H200]
#   BIN_LIMIT_MIB      what the archive may weigh [64]
#
# Usage: models/nn/scripts/cuda-build.sh   (from anywhere inside the repository)
set -euo pipefail

CUDA_VERSION="${CUDA_VERSION:-13.0}"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
BIN_LIMIT_MIB="${BIN_LIMIT_MIB:-64}"

root="$(cd "$(dirname "$0")/../../.." && pwd)"
tools="$root/target/cuda-tools"
target="$root/target/cuda"
bin="$root/target/cuda-bin"
start=$(date +%s)

say() { printf '[cuda-build %4ds] %s\n' $(($(date +%s) - start)) "$*"; }

case "$CUDA_VERSION" in
  [0-9]*.[0-9]*) ;;
  *) echo "cuda-build: CUDA_VERSION must be major.minor (13.0), got '$CUDA_VERSION'" >&2; exit 1 ;;
esac
major="${CUDA_VERSION%%.*}"
minor="${CUDA_VERSION#*.}"
for tool in python3 cargo cc strip; do
  command -v "$tool" >/dev/null || { echo "cuda-build: needs '$tool' on the PATH" >&2; exit 1; }
done

# 1. nvcc, the headers and the libraries, from the wheels, into target/cuda-tools.
home="$tools/nvidia/cu$major"
stamp="$tools/.installed-$CUDA_VERSION"
if [[ ! -f "$stamp" ]]; then
  say "installing CUDA $CUDA_VERSION's nvcc, headers and libraries from the Python registry into $tools"
  rm -rf "$tools"
  # One pip call: with --target, a second call would not add to the shared nvidia/ folder.
  python3 -m pip install --quiet --no-deps --no-cache-dir --disable-pip-version-check \
    --target "$tools" \
    "nvidia-cuda-nvcc==$CUDA_VERSION.*" "nvidia-nvvm==$CUDA_VERSION.*" \
    "nvidia-cuda-crt==$CUDA_VERSION.*" "nvidia-cuda-cccl==$CUDA_VERSION.*" \
    "nvidia-cuda-runtime==$CUDA_VERSION.*" "nvidia-cuda-nvrtc==$CUDA_VERSION.*" \
    "nvidia-cublas==$CUDA_VERSION.*" "nvidia-curand"
  touch "$stamp"
else
  say "CUDA $CUDA_VERSION's wheels already in $tools"
fi
[[ -x "$home/bin/nvcc" ]] || { echo "cuda-build: no nvcc in $home/bin after the install" >&2; exit 1; }
export PATH="$home/bin:$PATH"
export CUDA_HOME="$home"
export CUDARC_CUDA_VERSION="${major}0${minor}0"
nvcc --version | sed -n 4p

# 2. What the linker looks for: unversioned names, and libcuda.so (the driver's, not in any
# wheel) as a stand-in exporting the functions cudarc calls, with the driver's soname.
for lib in cudart cublas cublasLt nvrtc curand; do
  real=$(cd "$home/lib" && ls "lib$lib.so."* 2>/dev/null | grep -E "^lib$lib\.so\.[0-9]+$" | head -1 || true)
  [[ -n "$real" ]] || { echo "cuda-build: lib$lib.so.* missing from $home/lib" >&2; exit 1; }
  ln -sf "$real" "$home/lib/lib$lib.so"
done
say "fetching the crates"
cd "$root"
cargo fetch --quiet
cudarc=$(cargo metadata --format-version 1 --features hgp-nn/cuda 2>/dev/null |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="cudarc").rsplit("/",1)[0])')
mkdir -p "$home/lib/stubs"
python3 - "$cudarc/src/driver/sys/mod.rs" "$home/lib/stubs/libcuda.c" <<'PY'
import re, sys
names = sorted(set(re.findall(r"^\s+fn (cu[A-Z]\w*)\(", open(sys.argv[1]).read(), re.M)))
if len(names) < 100:
    sys.exit(f"cuda-build: only {len(names)} driver functions found in {sys.argv[1]}")
with open(sys.argv[2], "w") as f:
    f.write("/* Link-time stand-in for the CUDA driver: never loaded (the soname is the driver's). */\n")
    f.writelines(f"void {n}(void) {{}}\n" for n in names)
PY
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib/stubs/libcuda.so" "$home/lib/stubs/libcuda.c"

# 3. The build, into its own target folder (the default build is left alone).
export CARGO_TARGET_DIR="$target"
export RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,-rpath-link,$home/lib"
say "building hgp with --features cuda (sm_$CUDA_COMPUTE_CAP) into $target"
cargo build --release --locked -p hgp-apps --features cuda --bin hgp
say "building hgp-nn's GPU tests with --features cuda"
cargo test --release --locked -p hgp-nn --features cuda --test gpu --no-run
# Its path (built: no work), from cargo's messages.
tests=$(cargo test --release --locked -p hgp-nn --features cuda --test gpu --no-run \
  --message-format json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="gpu": print(m["executable"])')
[[ -n "$tests" ]] || { echo "cuda-build: the GPU test binary was not built" >&2; exit 1; }

# 4. The binaries, stripped, and whether they fit what travels.
rm -rf "$bin"
mkdir -p "$bin"
cp "$target/release/hgp" "$bin/hgp"
cp "$tests" "$bin/gpu-tests"
strip "$bin/hgp" "$bin/gpu-tests"
ls -l "$bin"
say "packing them into $bin/hgp-cuda.tar.xz"
python3 - "$bin" <<'PY2'
import os, sys, tarfile
b = sys.argv[1]
with tarfile.open(os.path.join(b, "hgp-cuda.tar.xz"), "w:xz", preset=6) as t:
    for name in ("hgp", "gpu-tests"):
        t.add(os.path.join(b, name), arcname=name)
PY2
bytes=$(wc -c <"$bin/hgp-cuda.tar.xz")
say "the archive weighs $((bytes / 1024)) KiB (limit $BIN_LIMIT_MIB MiB)"
if ((bytes > BIN_LIMIT_MIB * 1024 * 1024)); then
  echo "cuda-build: the archive ($((bytes / 1048576)) MiB) does not fit in $BIN_LIMIT_MIB MiB" >&2
  exit 1
fi
say "needs on the GPU machine: a driver for CUDA >= $CUDA_VERSION and these libraries:"
ldd "$bin/hgp" | grep -E 'cu|nvrtc' | sed 's/^/    /' || true
say "done: on the GPU machine, models/nn/scripts/gpu-check.sh target/cuda-bin/hgp-cuda.tar.xz"
