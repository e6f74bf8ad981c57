#!/usr/bin/env python3
"""Times paper 004's large networks in PyTorch on the CPU, for the comparison with
`cargo bench -p hgp-nn --bench cnn` (the `fused-gradient` / `fused-hvp` rows).

The same networks and batch as the bench:
- MobileNet-v2 as TorchVision builds it (`mobilenet_v2(num_classes=C)`, batch normalization
  with batch statistics, i.e. in training mode), on 32 x 32 colour images (CIFAR-10, C = 10);
- the next-character LSTM: Embedding(80, 8) -> LSTM(8, 256, 2 layers) -> Linear(256, 80) on
  the last hidden state, on windows of 80 symbols (LEAF's) and of 200.

For each: the gradient of the mean cross-entropy over a batch (one backward pass), and a
Hessian-vector product by double backward (the gradient with `create_graph=True`, then the
gradient of its inner product with a fixed direction v). Each is timed `--repeat` times after
one warm-up; the median is printed, one JSON object per line:

    {"network": ..., "what": "gradient" | "hvp", "batch": 128, "threads": 2,
     "seconds": median, "all": [...], "torch": version}

PyTorch is not a dependency of the project: `pip install torch torchvision` to run this.

    python3 models/nn/scripts/torch_compare.py --threads 2 --batch 128
"""

import argparse
import json
import statistics
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--batch", type=int, default=128, help="instances per batch")
    p.add_argument("--repeat", type=int, default=5, help="timed runs of each (median printed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, data and v")
    p.add_argument(
        "--networks",
        default="mobilenet-v2,lstm-80,lstm-200",
        help="comma-separated: mobilenet-v2, lstm-80, lstm-200",
    )
    p.add_argument(
        "--double",
        action="store_true",
        help="f64 instead of f32 (the bench's f32 rows are the comparison)",
    )
    return p.parse_args()


def mobilenet(torch, batch, dtype):
    import torchvision

    net = torchvision.models.mobilenet_v2(num_classes=10).to(dtype)
    net.train()  # batch normalization over the batch, as the paper trains
    x = torch.randn(batch, 3, 32, 32, dtype=dtype)
    y = torch.randint(0, 10, (batch,))
    return net, (lambda: net(x)), y


class CharLstm:
    """Embedding(80, 8) -> LSTM(8, 256, 2) -> Linear(256, 80) on the last hidden state."""

    def __init__(self, torch, dtype):
        nn = torch.nn
        self.embed = nn.Embedding(80, 8).to(dtype)
        self.lstm = nn.LSTM(8, 256, num_layers=2, batch_first=True).to(dtype)
        self.head = nn.Linear(256, 80).to(dtype)
        self.modules = [self.embed, self.lstm, self.head]

    def parameters(self):
        return [p for m in self.modules for p in m.parameters()]

    def __call__(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out[:, -1, :])


def lstm(torch, batch, dtype, seq):
    net = CharLstm(torch, dtype)
    x = torch.randint(0, 80, (batch, seq))
    y = torch.randint(0, 80, (batch,))
    return net, (lambda: net(x)), y


def timed(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main():
    args = parse()
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dtype = torch.float64 if args.double else torch.float32
    # cuDNN-free CPU kernels; the double backward through nn.LSTM needs the native path.
    torch.backends.cudnn.enabled = False
    for name in args.networks.split(","):
        if name == "mobilenet-v2":
            net, forward, y = mobilenet(torch, args.batch, dtype)
        elif name.startswith("lstm-"):
            net, forward, y = lstm(torch, args.batch, dtype, int(name[len("lstm-"):]))
        else:
            raise SystemExit(f"--networks: unknown network {name!r}")
        params = [p for p in net.parameters() if p.requires_grad]
        v = [torch.randn_like(p) for p in params]
        loss_fn = torch.nn.functional.cross_entropy

        def gradient():
            loss = loss_fn(forward(), y)
            return torch.autograd.grad(loss, params)

        def hvp():
            loss = loss_fn(forward(), y)
            g = torch.autograd.grad(loss, params, create_graph=True)
            dot = sum((gi * vi).sum() for gi, vi in zip(g, v))
            return torch.autograd.grad(dot, params)

        for what, fn in (("gradient", gradient), ("hvp", hvp)):
            median, times = timed(fn, args.repeat)
            print(
                json.dumps(
                    {
                        "network": name,
                        "what": what,
                        "batch": args.batch,
                        "threads": args.threads,
                        "dtype": "f64" if args.double else "f32",
                        "seconds": median,
                        "all": times,
                        "torch": torch.__version__,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
