#!/usr/bin/env python3
"""The step table: cmha's training step against PyTorch eager and torch.compile.

  tests/bench/step_table_vs_pytorch.sh [--threads 1 2] [--repeats 3] [--steps 3] [--models ...]
      [--dtypes f32 bf16] [--modes eager default [max-autotune-no-cudagraphs]] [--compile-budget S]

(the .sh picks the interpreter: tests/bench/python/bench_python.sh). For
every thread count, model and dtype (a "cell"), one process builds the
PyTorch side of `cmha bench RECIPE` (pytorch_transformer_bench.StepBench:
tests/reference's modules, the same batch, optimiser and loss) and compiles
it once per torch.compile mode (Inductor; untimed), then, `repeats` times,
runs `cmha bench RECIPE` (its own warm-up step, `steps` timed) and `steps`
timed steps of each PyTorch variant in turn: interleaved, so a slow spell of
the machine hits every side alike. Each figure is the median over the
repeats of each repeat's median step. bf16 is cmha's train.bf16 beside
torch.autocast(bfloat16) around forward and loss; a compile mode failing, or
compiling for longer than --compile-budget seconds, leaves its column "n/a"
and the reason below the table.

The GEMM ceilings come from the same run, before each thread count's cells:
cmha's oneDNN (build/tests/bench/gemm_ceiling: a 2048³ matmul in f32 and in
bf16) and torch.mm in this interpreter (MKL for f32, oneDNN for bf16); the
ceiling of a dtype is the larger of the two medians. MFU = the step's GEMM
flops (cmha bench's gemm_tflop_per_step; the PyTorch side runs the same
architecture, so the same flops) / step time / ceiling.

Prints the table (text), then one JSON line per cell for the record.
"""
import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MODELS = {
    "concat": ("concat D_k 256", "recipes/bench/transformer_small_concat_dk256.yaml"),
    "collab": ("collab D~k 64", "recipes/bench/transformer_small_collab_dk64.yaml"),
    "vit": ("DeiT-Ti ViT", "recipes/bench/deit_tiny_vit.yaml"),
}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def load_average():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_cmha(cmha, recipe, threads, steps, bf16, overrides):
    out = subprocess.run([cmha, "bench", recipe, "--steps", str(steps), "--warmup", "1", "--threads", str(threads),
                          f"train.bf16={'true' if bf16 else 'false'}", *overrides],
                         cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"step_table: cmha bench {recipe} failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cell(args):
    """One model × dtype × thread count, interleaved; prints one JSON line."""
    import torch
    sys.path.insert(0, HERE)
    from pytorch_transformer_bench import StepBench
    torch.set_num_threads(args.threads)
    name, recipe = MODELS[args.model]
    bf16 = args.dtype == "bf16"
    overrides = [x for x in args.set if ":" not in x.split("=", 1)[0]] + \
        [x.split(":", 1)[1] for x in args.set if x.startswith(args.model + ":")]  # the model's own last: it wins
    bench = StepBench(os.path.join(ROOT, recipe), overrides, bf16=bf16)
    fns, failed, compile_s = {}, {}, {}
    def over_budget(signum, frame):
        raise TimeoutError(f"still compiling after {args.compile_budget} s")

    signal.signal(signal.SIGALRM, over_budget)
    for mode in args.modes:
        t0 = time.perf_counter()
        try:
            signal.alarm(args.compile_budget if mode != "eager" else 0)
            fn = bench.loss if mode == "eager" else bench.compiled(None if mode == "default" else mode)
            for _ in range(2):  # compiles forward, then backward; the optimiser's state appears
                bench.step(fn)
            fns[mode] = fn
        except Exception as e:  # noqa: BLE001: a mode that does not run is reported, not fatal
            failed[mode] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        finally:
            signal.alarm(0)
        compile_s[mode] = time.perf_counter() - t0
    ms = {"cmha": []} | {m: [] for m in fns}
    cmha_json = None
    for _ in range(args.repeats):
        cmha_json = run_cmha(args.cmha, recipe, args.threads, args.steps, bf16, overrides)
        ms["cmha"].append(cmha_json["step_ms_median"])
        for mode, fn in fns.items():
            ms[mode].append(statistics.median(bench.step(fn) for _ in range(args.steps)))
    print(json.dumps({"model": args.model, "name": name, "recipe": recipe, "overrides": overrides, "dtype": args.dtype,
                      "threads": args.threads, "units": bench.units, "unit": bench.unit,
                      "gemm_tflop_per_step": cmha_json["gemm_tflop_per_step"],
                      "step_ms": {k: statistics.median(v) for k, v in ms.items()}, "step_ms_runs": ms,
                      "failed": failed, "warmup_and_compile_s": compile_s, "load": load_average()}))


def torch_ceiling(threads, n=2048):
    import torch
    torch.set_num_threads(threads)
    out = {}
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        rates, spent = [], 0.0
        for i in range(200):
            t0 = time.perf_counter()
            torch.mm(a, b)
            s = time.perf_counter() - t0
            if i >= 2:
                rates.append(2 * n ** 3 / s * 1e-9)
                spent += s
            if len(rates) >= 5 and spent >= 1.0:
                break
        out[name] = statistics.median(rates)
    return out


def cmha_ceiling(binary, threads):
    out = subprocess.run([binary, str(threads)], capture_output=True, text=True, check=True)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    return {x["gemm"].split()[-1]: x["gflop_s_median"] for x in lines}


def fmt(x, spec=".0f"):
    return "n/a" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--dtypes", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16"])
    ap.add_argument("--modes", nargs="+", default=["eager", "default"],
                    help="PyTorch variants: eager, default (torch.compile), or another torch.compile mode, "
                         "e.g. max-autotune-no-cudagraphs (its GEMM autotuning takes many minutes a cell)")
    ap.add_argument("--compile-budget", type=int, default=1200, metavar="S",
                    help="seconds a torch.compile mode may take to compile a cell before it counts as not running")
    ap.add_argument("--set", action="append", default=[], metavar="[MODEL:]KEY.PATH=VALUE",
                    help="a recipe override for both sides (e.g. bench.batch_size=64), or for one model "
                         "(vit:bench.batch_size=8)")
    ap.add_argument("--cmha", default=os.path.join(ROOT, "build", "cmha"))
    ap.add_argument("--ceiling", default=os.path.join(ROOT, "build", "tests", "bench", "gemm_ceiling"))
    ap.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        args.threads = args.threads[0]
        return cell(args)
    for path in (args.cmha, args.ceiling):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"step_table: {path} is missing: build it (ninja -C build cmha gemm_ceiling)")
    import torch
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; load {load_average()} at the start")
    print(f"cmha {commit} ({args.cmha}); PyTorch {torch.__version__} ({sys.executable}); "
          f"{args.repeats} repeats x {args.steps} steps, medians; overrides {args.set or 'none'}; started {time.strftime('%Y-%m-%d %H:%M %Z')}")
    cells, ceilings = [], {}
    for t in args.threads:
        ceilings[t] = {"cmha": cmha_ceiling(args.ceiling, t), "torch": torch_ceiling(t)}
        print(f"GEMM ceilings at {t} thread(s), GFLOP/s: cmha oneDNN f32 {ceilings[t]['cmha']['f32']:.0f}, "
              f"bf16 {ceilings[t]['cmha']['bf16']:.0f}; torch.mm f32 {ceilings[t]['torch']['f32']:.0f}, "
              f"bf16 {ceilings[t]['torch']['bf16']:.0f}", flush=True)
        for model in args.models:
            for dtype in args.dtypes:
                cmd = [sys.executable, os.path.abspath(__file__), "--cell", "--model", model, "--dtype", dtype,
                       "--threads", str(t), "--repeats", str(args.repeats), "--steps", str(args.steps),
                       *[f"--set={x}" for x in args.set], "--cmha", args.cmha, "--compile-budget", str(args.compile_budget), "--modes", *args.modes]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"step_table: the {model} {dtype} cell at {t} threads failed: "
                                     f"{out.stderr.strip()[-800:]}")
                c = json.loads(out.stdout.strip().splitlines()[-1])
                cells.append(c)
                print(f"  done: {model} {dtype} {t} thread(s), step ms {c['step_ms']}, load {c['load']}",
                      flush=True)
    print(f"load {load_average()} at the end\n")
    modes = [m for m in args.modes if m != "eager"]
    head = ["model", "dtype", "thr", "unit/s cmha", "eager"] + modes + ["x eager"] + [f"x {m[:12]}" for m in modes] + \
        ["MFU cmha", "MFU eager"] + [f"MFU {m[:12]}" for m in modes]
    rows = []
    for c in cells:
        rate = {k: c["units"] / (v / 1000) for k, v in c["step_ms"].items()}
        ceil = max(ceilings[c["threads"]]["cmha"][c["dtype"]], ceilings[c["threads"]]["torch"][c["dtype"]])
        mfu = {k: c["gemm_tflop_per_step"] * 1e3 / (v / 1000) / ceil for k, v in c["step_ms"].items()}
        rows.append([c["name"], c["dtype"], str(c["threads"]), fmt(rate["cmha"]), fmt(rate.get("eager"))] +
                    [fmt(rate.get(m)) for m in modes] +
                    [fmt(rate["cmha"] / rate[m], ".2f") if m in rate else "n/a" for m in ["eager"] + modes] +
                    [fmt(100 * mfu[k], ".0f") + "%" if k in mfu else "n/a" for k in ["cmha", "eager"] + modes])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(x.rjust(w) if i > 1 else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))))
    for c in cells:
        if c["failed"]:
            print(f"{c['name']} {c['dtype']} {c['threads']} thread(s): {c['failed']}")
    print()
    for c in cells:
        print(json.dumps(c))
    print(json.dumps({"ceilings_gflop_s": ceilings}))


if __name__ == "__main__":
    main()
