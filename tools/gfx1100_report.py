#!/usr/bin/env python3
"""Reads the kernel-resource-usage remarks and ISA that tools/gfx1100-check.sh
wrote, prints one line per kernel, and exits non-zero when a kernel uses
scratch or a format's kernel file (mmvq_<fmt>, expert_<fmt>, one per format
of ST_QTYPES) has no int8 dot instruction, or when a multi-token
matrix-instruction kernel (st_mmvq_mma_kernel) lacks v_wmma_i32_16x16x16_iu8."""
import glob
import os
import re
import subprocess
import sys

out = sys.argv[1]
fields = {"SGPRs": "sgpr", "VGPRs": "vgpr", "ScratchSize [bytes/lane]": "scratch",
          "Occupancy [waves/SIMD]": "occ", "LDS Size [bytes/block]": "lds"}
rows = []
for rem in sorted(glob.glob(os.path.join(out, "*.remarks"))):
    src = os.path.basename(rem)[:-len(".remarks")]
    cur = None
    for line in open(rem, errors="replace"):
        m = re.search(r"remark:\s+Function Name: (\S+)", line)
        if m:
            cur = {"file": src, "name": m.group(1)}
            rows.append(cur)
            continue
        for key, short in fields.items():
            m = re.search(r"remark:\s+" + re.escape(key) + r": (\d+)", line)
            if m and cur is not None:
                cur[short] = int(m.group(1))


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return r.stdout.splitlines()
    except Exception:
        return names


pretty = demangle([r["name"] for r in rows])
bad = []
print(f"{'file':<18} {'VGPR':>4} {'SGPR':>4} {'scratch':>7} {'LDS':>6} {'occ':>3}  kernel")
for r, p in zip(rows, pretty):
    p = re.sub(r"\(.*", "", p)
    print(f"{r['file']:<18} {r.get('vgpr', -1):>4} {r.get('sgpr', -1):>4} {r.get('scratch', -1):>7} "
          f"{r.get('lds', -1):>6} {r.get('occ', -1):>3}  {p[:110]}")
    if r.get("scratch", 0) != 0:
        bad.append(f"{p}: {r['scratch']} bytes of scratch per lane")
vg = [r.get("vgpr", 0) for r in rows]
print(f"\n{len(rows)} kernels; VGPR max {max(vg) if vg else 0}; "
      f"{sum(1 for v in vg if v > 96)} above 96 (fewer than 16 waves per SIMD)")
fmt_files = [s for s in sorted(glob.glob(os.path.join(out, "mmvq_*.s")) + glob.glob(os.path.join(out, "expert_*.s")))
             if os.path.basename(s) != "expert_misc.s"]
for s in fmt_files:
    text = open(s, errors="replace").read()
    n = text.count("v_dot4_i32_iu8")
    print(f"{os.path.basename(s)}: {n} v_dot4_i32_iu8")
    if n == 0:
        bad.append(f"{os.path.basename(s)}: no v_dot4_i32_iu8 in the ISA")
# Each st_mmvq_mma_kernel's own code (from its symbol's label to the end
# marker) must multiply on the matrix units.
n_mma = 0
for s in sorted(glob.glob(os.path.join(out, "mmvq_*.s"))):
    text = open(s, errors="replace").read()
    for m in re.finditer(r"^(_Z\d*st_mmvq_mma_kernel\w*):", text, re.M):
        end = text.find(".Lfunc_end", m.end())
        body = text[m.end():end if end > 0 else len(text)]
        n_mma += 1
        w = body.count("v_wmma_i32_16x16x16_iu8")
        if w == 0:
            bad.append(f"{os.path.basename(s)}: {demangle([m.group(1)])[0][:90]}: no v_wmma_i32_16x16x16_iu8")
print(f"{n_mma} matrix-instruction (multi-token) kernels checked for v_wmma_i32_16x16x16_iu8")
if n_mma == 0 and fmt_files:
    bad.append("no st_mmvq_mma_kernel found in the ISA")
if not rows:
    bad.append("no kernel-resource-usage remarks found")
if not fmt_files:
    bad.append("no per-format kernel files found")
for b in bad:
    print("gfx1100-check: FAIL:", b)
print("gfx1100-check:", "FAIL" if bad else "PASS", f"({len(rows)} kernels)")
sys.exit(1 if bad else 0)
