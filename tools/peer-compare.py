#!/usr/bin/env python3
"""Side-by-side table of `tune_decode bench` and the peer harness
(ggml's CUDA kernels, .device/peer/run-peer.sh) measured in the same device
call: case, n_tokens, our us, peer us, speedup (peer time / our time), our
fraction of the streaming read and of the same-size rotated read, and what
the two runs' spreads allow one to say of the cell: "ahead" or "behind" when
the intervals are apart, "cannot tell" when they overlap. Our interval is
median +- the interquartile width that bench prints (its spread column, a
cover of our p25..p75), the peer's its p25..p75. This is one run's noise;
drift between runs is not in it.

usage: tools/peer-compare.py BENCH.txt PEER.txt [--markdown]
"""
import re
import sys

OURS = re.compile(r"^(mmvq|expert|step)\s+(.*?)\s+(\d+)\s+(default|graph|in-place)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%\s+(\S+)")
PEER = re.compile(r"^peer (mmvq|moe-layer|moe-step) (.*) nt (\d+) us ([\d.]+) p25 ([\d.]+) p75 ([\d.]+)")
STEP = re.compile(r"synthetic (\d+) x MoE (\S+) (\d+)/(\d+)")


def fail(msg):
    sys.stderr.write("peer-compare: %s\n" % msg)
    sys.exit(2)


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    md = "--markdown" in argv
    if len(args) != 2:
        fail("usage: peer-compare.py BENCH.txt PEER.txt [--markdown]")
    ours, peer = {}, {}
    read_bw = None
    for line in read(args[0]):
        m = re.match(r"read bandwidth (\d+) GB/s", line)
        if m:
            read_bw = m.group(1)
        m = OURS.match(line)
        if not m:
            continue
        kind, shape, nt, path = m.group(1), m.group(2).strip(), int(m.group(3)), m.group(4)
        if kind == "step":
            s = STEP.search(shape)
            if not s:
                continue  # a model file's step: the peer has no such case
            layers, pair, embd, ff = s.groups()
            key = ("step", "%s %sx%s layers %s" % (pair, embd, ff, layers))
        elif kind == "expert":
            key = ("moe", shape)
        else:
            key = ("mmvq", shape)
        ours[(key, nt, path)] = (float(m.group(5)), float(m.group(6)) / 100.0, m.group(8), m.group(9))
    for line in read(args[1]):
        m = PEER.match(line)
        if not m:
            continue
        kind, shape, nt = m.group(1), m.group(2).strip(), int(m.group(3))
        if kind == "moe-layer":
            key = ("moe", re.sub(r" layers \d+$", "", shape))
            # the layer entry exists for every layer count: keep one
        elif kind == "moe-step":
            key = ("step", re.sub(r" e\d+ k\d+", "", shape))
        else:
            key = ("mmvq", shape)
        peer[(key, nt)] = (float(m.group(4)), float(m.group(5)), float(m.group(6)))
    rows = []
    for (key, nt, path), (us, spread, pread, psame) in sorted(ours.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        pe = peer.get((key, nt))
        if pe is None:
            continue
        p, p25, p75 = pe
        w = spread * us
        call = "ahead" if us + w < p25 else "behind" if us - w > p75 else "cannot tell"
        name = "%s %s%s" % (key[0], key[1], {"graph": " (graph)", "in-place": " (in-place)"}.get(path, ""))
        rows.append((name, nt, us, p, p / us, pread, psame, call))
    if not rows:
        fail("no case appears in both files")
    if md:
        print("| case | n_tokens | ours us | ggml us | speedup | ours %read | ours %same-size read | spreads |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %d | %.2f | %.2f | %.2fx | %s%% | %s | %s |" % r)
    else:
        print("%-52s %3s %10s %10s %8s %7s %7s  %s" % ("case", "nt", "ours us", "ggml us", "speedup", "%read", "%same", "spreads"))
        for r in rows:
            print("%-52s %3d %10.2f %10.2f %7.2fx %6s%% %7s  %s" % r)
    # the in-place layout (ggml's own blocks, no copy) is summed up on its
    # own line; the totals below are the repacked layout's
    inp = [r for r in rows if r[0].endswith(" (in-place)")]
    rows = [r for r in rows if not r[0].endswith(" (in-place)")]
    if inp:
        isp = [r[4] for r in inp]
        print("in-place layout: %d cells: speedup %.2fx .. %.2fx; %d slower than the peer" % (
            len(inp), min(isp), max(isp), sum(1 for x in isp if x < 1.0)))
    if not rows:
        return 0
    sp = [r[4] for r in rows]
    slower = [r for r in rows if r[4] < 1.0]
    print("%d cells%s: speedup %.2fx .. %.2fx; %d slower than the peer" % (
        len(rows), " (read %s GB/s)" % read_bw if read_bw else "", min(sp), max(sp), len(slower)))
    n = {c: sum(1 for r in rows if r[7] == c) for c in ("ahead", "cannot tell", "behind")}
    print("spreads of this run: %d ahead, %d cannot tell (the intervals overlap), %d behind" % (
        n["ahead"], n["cannot tell"], n["behind"]))
    for r in slower:
        print("  slower: %s nt %d: %.2fx" % (r[0], r[1], r[4]))
    for r in rows:
        if r[7] == "cannot tell":
            print("  cannot tell: %s nt %d: %.2f vs %.2f us" % (r[0], r[1], r[2], r[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
