"""Compares two records of `behaviour.sh record`, byte for byte, leaving out what measures
time or memory (it differs between any two runs).

Left out: JSON keys named in MEASURED (at any depth), CSV columns of those names, the
columns of Markdown tables whose header names seconds or memory, and stderr (progress lines
carry times), and in `*.log` the time stamps, the progress lines and every duration and size. Everything else, stdout and every written file, must be identical, but for
hgp-settings.json, which records the run's config: the second may add fields to the first
(a config that gained options), never change or drop one.
"""

import csv
import io
import json
import os
import re
import sys

MEASURED = {
    "wall_seconds",
    "comm_seconds",
    "comm_share",
    "peak_memory_bytes",
    "seconds",
    "seconds_per_round",
    "elapsed",
    "overhead_vs_fedavg_percent",
}
MD_MEASURED = re.compile(r"(^|\W)(s|seconds|s / round|time|memory|MB|peak|vs FedAvg)(\W|$)", re.I)


def strip_json(value):
    if isinstance(value, dict):
        return {k: strip_json(v) for k, v in value.items() if k not in MEASURED}
    if isinstance(value, list):
        return [strip_json(v) for v in value]
    return value


def normal_json_text(text):
    """Each JSON document of `text` (one a line or one in all) without the measured keys."""
    try:
        return json.dumps(strip_json(json.loads(text)), sort_keys=False)
    except ValueError:
        pass
    out = []
    for line in text.splitlines():
        try:
            out.append(json.dumps(strip_json(json.loads(line))))
        except ValueError:
            out.append(line)
    return "\n".join(out)


def normal_csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return text
    keep = [i for i, h in enumerate(rows[0]) if h.strip() not in MEASURED]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in rows:
        w.writerow([r[i] for i in keep if i < len(r)])
    return buf.getvalue()


def normal_md(text):
    out = []
    drop = None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            if drop is None:
                drop = {i for i, c in enumerate(cells) if MD_MEASURED.search(c.strip())}
            out.append("|".join(c for i, c in enumerate(cells) if i not in drop))
        else:
            drop = None
            out.append(line)
    return "\n".join(out)


DURATION = re.compile(r"\d+(\.\d+)?\s?(ms|s|min|h|d|MB|GB|KB|B)\b(\s\d+(\.\d+)?\s?(ms|s|min|h|d)\b)*")


def normal_log(text):
    """A progress log without its clock: the time stamps and the progress lines (written as
    time passes) left out, every other duration and size becoming `T`."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"^\[[^]]*\] ", "", line)
        if "elapsed" in line or "ETA" in line:
            continue
        lines.append(DURATION.sub("T", line))
    return "\n".join(lines)


def normal(path):
    data = open(path, "rb").read()
    name = os.path.basename(path)
    if name == "stdout" or name.endswith(".json"):
        return normal_json_text(data.decode("utf-8", "replace"))
    if name.endswith(".csv"):
        return normal_csv(data.decode("utf-8", "replace"))
    if name.endswith(".log"):
        return normal_log(data.decode("utf-8", "replace"))
    if name.endswith(".md"):
        return normal_md(data.decode("utf-8", "replace"))
    return data


def within(old, new):
    """Whether every field of `old` is in `new` with the same value (objects compared key by
    key; anything else exactly)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(k in new and within(v, new[k]) for k, v in old.items())
    return old == new


def settings_kept(a, b):
    """hgp-settings.json records a run's config: a record may add fields to an older one (a
    config that gained options), never change or drop one."""
    try:
        old, new = json.load(open(a)), json.load(open(b))
    except ValueError:
        return False
    # A field an older record kept beside the options (a per-seed run's "seed") is one of
    # the config's options now.
    if isinstance(old, dict) and isinstance(new, dict) and isinstance(new.get("options"), dict):
        for key in [k for k in old if k not in new and k in new["options"]]:
            if old[key] != new["options"][key]:
                return False
            del old[key]
    return within(old, new)


def files(root):
    found = set()
    for base, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(base, n), root)
            if os.path.basename(rel) != "stderr":
                found.add(rel)
    return found


def main(a, b):
    fa, fb = files(a), files(b)
    bad = 0
    for rel in sorted(fa ^ fb):
        print(f"only in {'the first' if rel in fa else 'the second'}: {rel}")
        bad += 1
    for rel in sorted(fa & fb):
        if os.path.basename(rel) == "hgp-settings.json":
            if not settings_kept(os.path.join(a, rel), os.path.join(b, rel)):
                print(f"differs: {rel} (a field of the first changed or went)")
                bad += 1
            continue
        if normal(os.path.join(a, rel)) != normal(os.path.join(b, rel)):
            print(f"differs: {rel}")
            bad += 1
    cases = sorted({rel.split(os.sep)[0] for rel in fa | fb})
    print(f"{len(cases)} cases, {len(fa & fb)} files compared, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: behaviour_compare.py RECORD1 RECORD2")
    sys.exit(main(sys.argv[1], sys.argv[2]))
