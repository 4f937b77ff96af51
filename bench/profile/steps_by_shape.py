#!/usr/bin/env python3
"""Kernel time of onnxruntime profile files, per pass shape.

The engine's sessions write onnxruntime's profiler JSON when the JVM runs with
-Dortserve.bench.ort-profile=/some/prefix (docs/benchmarks.md). Each model_run is one pass; its node
events are grouped by the first GroupQueryAttention's shapes: (batch, new tokens, KV buffer positions).
Prints, per shape: passes, mean pass time, mean kernel time and the op types that take it.

usage: steps_by_shape.py PROFILE.json [...]
"""
import collections
import json
import sys


def main(files):
    shapes = collections.defaultdict(lambda: {"n": 0, "run": 0.0, "ops": collections.Counter()})
    for f in files:
        events = json.load(open(f))
        runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
        nodes = sorted((e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")), key=lambda e: e["ts"])
        j = 0
        for r in runs:
            start, end = r["ts"], r["ts"] + r["dur"]
            ops, key = collections.Counter(), None
            while j < len(nodes) and nodes[j]["ts"] < start:
                j += 1
            while j < len(nodes) and nodes[j]["ts"] <= end:
                args = nodes[j].get("args", {})
                op = args.get("op_name", "?")
                ops[op] += nodes[j]["dur"]
                if op == "GroupQueryAttention" and key is None:
                    shape = args.get("input_type_shape", [])
                    try:
                        q, past = list(shape[0].values())[0], list(shape[3].values())[0]
                        key = (q[0], q[1], past[2])
                    except (IndexError, KeyError, AttributeError):
                        key = ("?",)
                j += 1
            s = shapes[key]
            s["n"] += 1
            s["run"] += r["dur"]
            s["ops"].update(ops)
    for key, s in sorted(shapes.items(), key=lambda kv: str(kv[0])):
        n, total = s["n"], sum(s["ops"].values())
        if total == 0:
            continue
        print(f"batch, new tokens, KV buffer = {key}: {n} passes, pass {s['run'] / n / 1000:.2f} ms, kernels {total / n / 1000:.2f} ms")
        for op, d in s["ops"].most_common(6):
            print(f"    {op:30s} {d / n / 1000:8.2f} ms  {100 * d / total:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
