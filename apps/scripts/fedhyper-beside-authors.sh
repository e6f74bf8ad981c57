#!/usr/bin/env bash
# Paper 001 (FedHyper) beside its authors' code, on the same Fashion-MNIST images: their
# `src/federated_main.py` (ATP-1010/FedHyper at the commit below) and `hgp fedhyper`, at the
# same network, clients, split, local steps, batch, rate and rounds, and the test accuracy of
# each at rounds 10, 20, …, printed side by side.
#
#   apps/scripts/fedhyper-beside-authors.sh [WORK]       # WORK: default target/fedhyper-beside
#
# Environment: FEDHYPER_REPO (a clone or URL of ATP-1010/FedHyper; default its GitHub address),
# HGP (the hgp binary; default target/release/hgp), PYTHON (one with torch, torchvision, numpy,
# tensorboardX and tqdm: `pip install torch torchvision tensorboardX tqdm`), SEEDS (default 2),
# ROUNDS (50), SPLIT (their Dirichlet α, default 0.5; `iid` for equal random parts), METHODS.
# Needs data/fashion-mnist (scripts/fetch-data.sh). PyTorch is used here only, never by the
# build or the tests. About 25 minutes on 2 cores at the defaults.
#
# Their code is run with these changes, each to make the two runs the same experiment (the
# patches are applied by this script to its own clone; the file names say where):
#  1. utils.py: `--dataset fmnist` loads Fashion-MNIST (their code loads MNIST's class from
#     the fmnist folder), standardized as ours by the training images' own pixel mean and
#     deviation (0.2860, 0.3530; their code divides by MNIST's, 0.1307 and 0.3081).
#  2. models.py: our network, the small CNN of HGP Table 3 (Conv(1,20,5)–ReLU–MaxPool–
#     Conv(20,20,5)–ReLU–MaxPool–Linear(320,10)), as `--model smallcnn`.
#  3. update.py: SGD's momentum from `--momentum` (their 0.5 is written in; 0 here, as ours),
#     and exactly K local steps a round (`--local_steps`, ours 5), where theirs run
#     `--local_ep` epochs over the client's images.
#  4. federated_main.py: `--seed` seeds NumPy and torch (their code takes it and never uses it).
#  5. federated_main.py: its per-round "train accuracy" evaluates one client once, not the same
#     client 100 times (the same number, a fifth of the time).
# Left as theirs: each client trains on 80 % of its images (the rest unused); their Dirichlet
# split is by class (each class's images shared out by Dir(α) over the clients), ours by
# client (each client's label proportions ~ Dir(α), sizes equal); they evaluate on all 10,000
# test images (ours too: --test-images 10000).
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$root/target/fedhyper-beside}"
repo="${FEDHYPER_REPO:-https://github.com/ATP-1010/FedHyper}"
commit=d6a57c54d7e9293cabedc8f80c7d61d3cc321633
hgp="${HGP:-$root/target/release/hgp}"
python="${PYTHON:-python3}"
seeds="${SEEDS:-2}"
rounds="${ROUNDS:-50}"
split="${SPLIT:-0.5}"
steps=5
batch=64
lr=0.05
# Their --function and our --methods, pairwise.
methods="${METHODS:-FedAvg:fedavg FedHyper-G:fedhyper-g FedHyper-GM:fedhyper-gm FedHyper-CL:fedhyper-cl-code FedHyper-CL:fedhyper-cl}"

data="$root/data/fashion-mnist"
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "error: no $data: run scripts/fetch-data.sh first" >&2; exit 1; }
[ -x "$hgp" ] || { echo "error: no hgp binary at $hgp: cargo build --release -p hgp-apps" >&2; exit 1; }
"$python" -c 'import torch, torchvision, tensorboardX, tqdm, numpy' 2>/dev/null \
  || { echo "error: $python lacks torch, torchvision, tensorboardX, tqdm or numpy (pip install torch torchvision tensorboardX tqdm)" >&2; exit 1; }

mkdir -p "$work"
theirs="$work/FedHyper"
if [ ! -d "$theirs/.git" ]; then
  git clone -q "$repo" "$theirs"
fi
git -C "$theirs" checkout -q -f "$commit"

# The patches (1–4 above), each checked to have taken.
"$python" - "$theirs/src" "$data/train-images-idx3-ubyte.gz" <<'PY'
import gzip, sys, pathlib
import numpy as np
src = pathlib.Path(sys.argv[1])
pixels = np.frombuffer(gzip.open(sys.argv[2]).read()[16:], dtype=np.uint8) / 255.0
mean, std = float(pixels.mean()), float(pixels.std())
def patch(name, old, new, count=1):
    p = src / name
    s = p.read_text()
    if s.count(old) != count:
        sys.exit(f"patch of {name} no longer applies: {old!r} found {s.count(old)} times")
    p.write_text(s.replace(old, new))
# 1. Fashion-MNIST, standardized by its training images' mean and deviation (as ours).
patch("utils.py", "        train_dataset = datasets.MNIST(data_dir, train=True, download=True,",
      "        cls = datasets.FashionMNIST if args.dataset == 'fmnist' else datasets.MNIST\n"
      "        train_dataset = cls(data_dir, train=True, download=False,")
patch("utils.py", "        test_dataset = datasets.MNIST(data_dir, train=False, download=True,",
      "        test_dataset = cls(data_dir, train=False, download=False,")
patch("utils.py", "            transforms.ToTensor(),\n            transforms.Normalize((0.1307,), (0.3081,))])",
      f"            transforms.ToTensor(),\n            transforms.Normalize(({mean!r},), ({std!r},))])")
patch("utils.py", "user_groups = cifar_dis(train_dataset, args.num_users, 0.5, args.num_users * args.frac)",
      "user_groups = cifar_dis(train_dataset, args.num_users, args.alpha, args.num_users * args.frac)", count=2)
# 2. Our network.
patch("models.py", "class CNNMnist(nn.Module):",
      "class SmallCnn(nn.Module):\n"
      "    def __init__(self, args):\n"
      "        super().__init__()\n"
      "        self.conv1 = nn.Conv2d(1, 20, 5)\n"
      "        self.conv2 = nn.Conv2d(20, 20, 5)\n"
      "        self.fc = nn.Linear(320, args.num_classes)\n"
      "    def forward(self, x):\n"
      "        x = F.max_pool2d(F.relu(self.conv1(x)), 2)\n"
      "        x = F.max_pool2d(F.relu(self.conv2(x)), 2)\n"
      "        return self.fc(x.flatten(1))\n\n\n"
      "class CNNMnist(nn.Module):")
patch("federated_main.py", "    if args.model == 'cnn':",
      "    if args.model == 'smallcnn':\n"
      "        from models import SmallCnn\n"
      "        global_model = SmallCnn(args=args)\n"
      "    elif args.model == 'cnn':")
# 3. Momentum from the flag, exactly K local steps.
patch("update.py", "momentum=0.5)", "momentum=self.args.momentum)", count=2)
patch("update.py", "        for iter in range(self.args.local_ep):\n            batch_loss = []",
      "        steps = 0\n        for iter in range(self.args.local_ep):\n"
      "            if steps >= self.args.local_steps:\n                break\n"
      "            batch_loss = []")
patch("update.py", "                last_para = parameters_to_vector(model.parameters())",
      "                if steps >= self.args.local_steps:\n                    break\n"
      "                steps += 1\n"
      "                last_para = parameters_to_vector(model.parameters())")
patch("options.py", "    args = parser.parse_args()",
      "    parser.add_argument('--local_steps', type=int, default=10**9)\n"
      "    parser.add_argument('--alpha', type=float, default=0.5)\n"
      "    args = parser.parse_args()")
# 5. Their per-round "train accuracy" evaluates the same client (the last participant) 100
#    times over; once gives the same number (evaluation only: no random draw, no training).
patch("federated_main.py", "        for c in range(args.num_users):\n            local_model = LocalUpdate(",
      "        for c in range(1):\n            local_model = LocalUpdate(")
# 4. Seeds.
patch("federated_main.py", "    args = args_parser()\n",
      "    args = args_parser()\n    np.random.seed(args.seed)\n    torch.manual_seed(args.seed)\n")
PY

# Their loader reads FashionMNIST/raw/ under ../data/fmnist/ (relative to src/).
raw="$theirs/data/fmnist/FashionMNIST/raw"
mkdir -p "$raw" "$theirs/src/save/objects" "$theirs/logs"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -s "$raw/$f" ] || gunzip -c "$data/$f.gz" > "$raw/$f"
done

if [ "$split" = iid ]; then their_split=(--iid 1); else their_split=(--iid 0 --alpha "$split"); fi
mkdir -p "$work/theirs"
for pair in $methods; do
  fn="${pair%%:*}"
  for ((s = 0; s < seeds; s++)); do
    log="$work/theirs/$fn-$s.txt"
    [ -s "$log" ] && grep -q '^Test Process:' "$log" && continue
    echo "theirs: $fn, seed $s …" >&2
    (cd "$theirs/src" && "$python" federated_main.py --function "$fn" --dataset fmnist \
      --model smallcnn --optimizer sgd --momentum 0 --lr "$lr" --local_bs "$batch" \
      --local_ep 10 --local_steps "$steps" --num_users 100 --frac 0.1 --epochs "$rounds" \
      "${their_split[@]}" --gpu '' --gpu_id 0 --seed "$s" > "$log" 2>&1) \
      || { echo "error: their $fn failed; see $log" >&2; exit 1; }
  done
done

ours_methods=$(for pair in $methods; do echo -n "${pair##*:},"; done)
echo "ours: ${ours_methods%,} …" >&2
"$hgp" fedhyper --dataset fmnist --data-dir "$data" --model cnn --splits "$split" \
  --rounds "$rounds" --methods "${ours_methods%,}" --seeds "$seeds" --seed 0 \
  --test-images 10000 --lr "$lr" --local-steps "$steps" --batch "$batch" --resume \
  --out "$work/ours" > /dev/null

"$python" - "$work" "$rounds" "$seeds" "$split" $methods <<'PY'
import ast, csv, sys, statistics as st
work, rounds, seeds, split = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pairs = [p.split(":") for p in sys.argv[5:]]
ours = {}
with open(f"{work}/ours/rounds.csv") as f:
    for r in csv.DictReader(f):
        ours.setdefault(r["method"], {}).setdefault(int(r["round"]), []).append(100 * float(r["test_accuracy"]))
def theirs(fn):
    curves = []
    for s in range(seeds):
        for line in open(f"{work}/theirs/{fn}-{s}.txt"):
            if line.startswith("Test Process:"):
                curves.append(ast.literal_eval(line.split(":", 1)[1].strip()))
    return curves
marks = [k for k in range(10, rounds + 1, 10)] or [rounds]
def cell(v):
    return f"{st.mean(v):.1f} ± {st.stdev(v):.1f}" if len(v) > 1 else f"{v[0]:.1f}"
print(f"Fashion-MNIST, small CNN, 100 clients (10 a round), split {split}, K = 5, B = 64, β⁰ = 0.05, "
      f"{seeds} seeds: test accuracy (%) at rounds {', '.join(map(str, marks))}\n")
print("| theirs (--function) | ours (--methods) | " + " | ".join(f"round {k}: theirs / ours" for k in marks) + " |")
print("|---|---|" + "---|" * len(marks))
for fn, m in pairs:
    t = theirs(fn)
    cells = []
    for k in marks:
        tv = [c[k - 1] for c in t if len(c) >= k]
        ov = ours.get(m, {}).get(k, [])
        cells.append(f"{cell(tv) if tv else '-'} / {cell(ov) if ov else '-'}")
    print(f"| {fn} | {m} | " + " | ".join(cells) + " |")
PY
