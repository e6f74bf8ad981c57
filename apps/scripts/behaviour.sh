#!/usr/bin/env bash
# Behaviour, bit for bit: records what `hgp` prints (`--json`) and every file it writes for
# `--quick` runs of every subcommand, and compares two such records byte for byte, with the
# fields that measure time or memory left out (they differ from run to run).
#
#   apps/scripts/behaviour.sh record BIN DIR     # run every case with the binary BIN into DIR
#   apps/scripts/behaviour.sh compare DIR1 DIR2  # exit 1 and name each difference
#   apps/scripts/behaviour.sh cases              # list the cases
#
# Typical use around a change that must not change any number:
#   cargo build --release -p hgp-apps --features mpi && cp target/release/hgp /tmp/hgp-before
#   apps/scripts/behaviour.sh record /tmp/hgp-before /tmp/before
#   … the change …
#   cargo build --release -p hgp-apps --features mpi
#   apps/scripts/behaviour.sh record target/release/hgp /tmp/after
#   apps/scripts/behaviour.sh compare /tmp/before /tmp/after
#
# Every case runs in the same folder (/tmp/hgp-behaviour-run) whatever DIR is, so paths that a
# run writes into its settings are the same in both records. The MPI case needs `mpirun` (and a
# binary built with `--features mpi`); it is skipped, and said so, without it. Takes about 15
# minutes on 2 cores. Needs python3 (for writing the small CIFAR-10 folder and for comparing).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
run_root=/tmp/hgp-behaviour-run

# name|out|arguments: with `out`, the output folder is added as `--out $run_root/out` (the
# commands without --out print everything they produce).
cases() {
  cat <<'EOF'
error|out|error --quick --json
hypergrad|-|hypergrad --json
hypergrad-exact|-|hypergrad --estimator exact --inner exact --json
hypergrad-aggitd|-|hypergrad --estimator aggitd --inner-steps 40 --fraction 0.67 --local-steps 3 --inner-lr 0.5 --json
hypergrad-pdbo|-|hypergrad --estimator pdbo-hgp --pdbo-lr 1 --neumann-terms 200 --json
hypergrad-data|-|hypergrad --data @SYNTH --network randd --averager push-sum --push-steps 100 --neumann-terms 1000 --json
influence|out|influence --quick --json
influence-cnn|out|influence --model cnn --quick --json
personalize|out|personalize --quick --json
personalize-pdbo|out|personalize --estimator pdbo --quick --json
fbo|out|fbo --quick --json
fbo-lenet|out|fbo --model lenet --quick --dataset cifar10 --data-dir @CIFAR --clients 4 --test-images 60 --json
fedhyper|out|fedhyper --quick --json
faults|out|faults --quick --json
network|-|network --network randd --clients 10 --seed 3 --json
gen-synthetic|out|gen-synthetic --clients 4 --dim 6 --seed 3
EOF
}

# A small CIFAR-10 folder in the binary layout (label byte, then the red, green and blue planes).
write_cifar() {
  python3 - "$1" <<'EOF'
import os, sys
folder = os.path.join(sys.argv[1], "cifar-10-batches-bin")
os.makedirs(folder, exist_ok=True)
for k, name in enumerate(["data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"]):
    out = bytearray()
    for r in range(100):
        label = (r * 7 + k) % 10
        out.append(label)
        for ch in range(3):
            base = 20 * label if ch == 0 else 60
            out.extend(((base + (p * (r + 3) + ch * 31) % 40) % 256) for p in range(1024))
    open(os.path.join(folder, name), "wb").write(out)
EOF
}

record() {
  local bin dir
  dir="$2"
  mkdir -p "$dir"
  dir="$(realpath "$dir")"
  rm -rf "$run_root"
  mkdir -p "$run_root/bin"
  # The same path for every binary: messages that name the program read the same.
  cp "$1" "$run_root/bin/hgp"
  local bin="$run_root/bin/hgp"
  write_cifar "$run_root/cifar"
  "$bin" gen-synthetic --clients 4 --dim 6 --seed 3 --out "$run_root/synth" >/dev/null
  while IFS='|' read -r name out args; do
    [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]] && continue
    echo "== $name: hgp $args" >&2
    rm -rf "$run_root/out" "$dir/$name"
    mkdir -p "$dir/$name"
    local start=$SECONDS
    args="${args//@CIFAR/$run_root/cifar}"
    args="${args//@SYNTH/$run_root/synth}"
    [ "$out" = out ] && args="$args --out $run_root/out"
    # shellcheck disable=SC2086
    (cd "$run_root" && "$bin" $args) \
      >"$dir/$name/stdout" 2>"$dir/$name/stderr" || echo "exit $?" >"$dir/$name/exit"
    [ -d "$run_root/out" ] && cp -r "$run_root/out" "$dir/$name/files"
    echo "   $((SECONDS - start)) s" >&2
  done < <(cases)
  # One process per client block: the same commands under mpirun, 2 ranks.
  for mpi_case in "mpi-hypergrad|-|hypergrad --clients 4 --engine mpi --json" \
    "mpi-influence|out|influence --quick --engine mpi --json"; do
    IFS='|' read -r name out args <<<"$mpi_case"
    [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]] && continue
    if ! command -v mpirun >/dev/null; then
      echo "== $name: skipped (no mpirun)" >&2
      continue
    fi
    echo "== $name: mpirun -n 2 hgp $args" >&2
    rm -rf "$run_root/out" "$dir/$name"
    mkdir -p "$dir/$name"
    [ "$out" = out ] && args="$args --out $run_root/out"
    # shellcheck disable=SC2086
    (cd "$run_root" && mpirun --allow-run-as-root --oversubscribe -n 2 "$bin" $args) \
      >"$dir/$name/stdout" 2>"$dir/$name/stderr" || echo "exit $?" >"$dir/$name/exit"
    [ -d "$run_root/out" ] && cp -r "$run_root/out" "$dir/$name/files"
  done
}

compare() {
  python3 "$here/behaviour_compare.py" "$1" "$2"
}

case "${1:-}" in
  record) record "$2" "$3" ;;
  compare) compare "$2" "$3" ;;
  cases) cases ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
