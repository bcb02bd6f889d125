"""freezeview against plain torch on two ladders of model sizes (issue 23).

Ladders, each rung saved once as a ``.pt`` file:

- ``L<n>``: a scripted ``nn.TransformerEncoder`` (d_model 256, 4 heads) of n layers
  (1.7k inlined nodes at 1 layer, 17.8k at 12, 70k at 48, 140k at 96);
- ``N<n>``: a flat stack of n Conv-BN-ReLU blocks (about 50 inlined nodes each).

Per rung, every command runs in a fresh interpreter, as a user runs it, ``--repeat``
times, alternating with plain torch in the same run:

- torch: ``torch.jit.load`` + ``torch.jit.freeze`` (and + ``torch.jit.save`` of the
  result, the baseline of ``freezeview freeze``), in a fresh interpreter too;
- ``freezeview explain MODEL``, ``check MODEL --expect`` (the expectations written
  once beforehand, untimed), ``freeze MODEL -o OUT``, ``export MODEL -o DIR``.

Printed per rung and command: the median wall time, its ratio to torch's median, and
the peak memory of the command's whole process tree (proportional set size, sampled
every 50 ms, so an export's forked helper and Graphviz count and pages they share
count once) with its ratio to torch's peak. ``--app`` adds the app's engine work through
its engine process (:class:`freezeview.session.remote.RemoteSession`, as
``freezeview MODEL.pt`` runs it): the verdicts, all steps, a re-run, and the memory of
both processes after the first run and after ``--reruns`` re-runs. Re-runs are timed
apart, the median of each kind (and its slowest, with the number of samples): ``r``
(the same plan again: the run only, as the app's ``r`` key), ``toggle`` (a preserved
attribute toggled back to names explained before: explain, then the run) and
``toggle-new`` (to a parameter never preserved before; every other toggle is one). A
toggle is timed as the screen waits for it: the run starts once torch's statuses are
shown, and the time is the last step's; when freezeview's reasons arrived is printed
apart (``reasons shown``). The first run's verdicts are torch's statuses shown. Re-runs
are compared with torch's freeze of the loaded model: the median of 14, seven in a
fresh process before the app's work and seven after. The engine's size is read 0.3 s
after every re-run (a reload the run set off may be under way then: the series shows
it) and, last, at rest: 2 s after the last one and once the engine has used no CPU for
half a second (a reload under way, or one the idle engine starts, is over); the largest
of the series is printed beside the last, and every re-run's time in order.

Usage::

    .venv/bin/python benchmarks/bench_scaling.py                  # quick: L1 L12 N8 N512
    .venv/bin/python benchmarks/bench_scaling.py --layers 1,12,48,96 --blocks 8,512,2048
    .venv/bin/python benchmarks/bench_scaling.py --layers 48 --blocks '' --repeat 1 --app

Each export also says whether every picture was drawn and ``index.html`` written.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Plain torch, in a fresh interpreter: load + freeze (+ save).
_TORCH = r"""
import sys, warnings
warnings.simplefilter("ignore")
import torch
frozen = torch.jit.freeze(torch.jit.load(sys.argv[1]))
if len(sys.argv) > 2:
    torch.jit.save(frozen, sys.argv[2])
"""

# The app's engine work through its engine process, timed from this (screen) side.
_APP = r"""
import gc, json, os, statistics, sys, threading, time, warnings
warnings.simplefilter("ignore")
from freezeview.session.remote import RemoteSession

def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

TICK = os.sysconf("SC_CLK_TCK")

def engine_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK

def cpu(pid):
    # Both processes' CPU seconds: on a busy machine wall times swing, CPU time less.
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK + time.process_time()

path, reruns = sys.argv[1], int(sys.argv[2])


def explained(preserved, then=None):
    # Explain as the screen does: torch's statuses shown first (reasons pending) when
    # the engine has them before the reasons; `then` runs once something is shown, while
    # the reasons are worked out. When (perf_counter, both processes' CPU) the statuses
    # came, `then` ended and the reasons came.
    marks, shown = {}, threading.Event()

    def first(views):
        marks["statuses"] = (time.perf_counter(), cpu(engine))
        shown.set()

    def work():
        try:
            session.explain(preserved, statuses=first)
        finally:
            marks["reasons"] = (time.perf_counter(), cpu(engine))
            marks.setdefault("statuses", marks["reasons"])
            shown.set()

    thread = threading.Thread(target=work)
    thread.start()
    shown.wait()
    result = None
    if then is not None:
        result = then()
        marks["then"] = (time.perf_counter(), cpu(engine))
    thread.join()
    return marks, result

start = time.perf_counter()
session = RemoteSession(path)
engine = session._proc.pid
opened = session.open()
passes = [p.id for p in opened.passes if p.default]
marks, _ = explained([])
verdicts, verdicts_cpu = marks["statuses"][0] - start, marks["statuses"][1]
reasons_at, reasons_cpu = marks["reasons"][0] - start, marks["reasons"][1]
# At load the screen starts the first run once the reasons are shown.
steps = list(session.run_steps([], passes))
all_steps = time.perf_counter() - start
all_cpu = cpu(engine)
# The app reads the frozen module's .code only when its .code view shows it: not here.
first = {"screen": rss(os.getpid()), "engine": rss(engine)}
params = [a.path for a in session.inventory.attributes if a.kind == "parameter"]
gc.freeze()
KINDS = ("r", "toggle", "toggle-new")
times = {k: [] for k in KINDS}
cpus = {k: [] for k in KINDS}
reasons = {k: [] for k in KINDS}
collects = []
engine_sizes = []
order = []  # (kind, seconds) of every re-run, in order
last_preserved = []
explained_names = {()}
for i in range(reruns):
    # r (the same plan: run_steps only, as the app's r key), a preserved attribute
    # toggled on (explain, then the run), then off with a pass toggled off. Every other
    # toggle on names a parameter never preserved before (toggle-new, sampled as often
    # as toggle), the others the last one again.
    param = params[(i // 6) % len(params)]
    preserved = [param] if i % 3 == 1 else []
    ticked = passes[:-1] if i % 3 == 2 else passes
    kind = "r" if preserved == last_preserved else "toggle"
    if kind == "toggle" and tuple(preserved) not in explained_names:
        kind = "toggle-new"  # names never explained before: the replay runs
    explained_names.add(tuple(preserved))
    t = time.perf_counter()
    # As the screen does at a run's start: the last run's steps go first.
    del steps
    gc.unfreeze()
    gc.collect()
    collects.append(time.perf_counter() - t)
    t = time.perf_counter()
    c = cpu(engine)
    run = lambda: list(session.run_steps(preserved, ticked))
    if kind == "r":
        steps = run()
        times[kind].append(time.perf_counter() - t)
        cpus[kind].append(cpu(engine) - c)
    else:
        # What the screen waits for: every step shown (the run starts once torch's
        # statuses are on screen); the reasons come after.
        marks, steps = explained(preserved, run)
        times[kind].append(marks["then"][0] - t)
        cpus[kind].append(marks["then"][1] - c)
        reasons[kind].append((marks["reasons"][0] - t, marks["reasons"][1] - c))
    order.append((kind, times[kind][-1]))
    last_preserved = preserved
    gc.freeze()
    # The engine answers before it collects and gives memory back: read after that.
    time.sleep(0.3)
    engine_sizes.append(rss(engine))
# At rest: 2 s on, and then once the engine has used no CPU for half a second (a
# reload the last run set off, or one the engine starts when idle, is over by then).
time.sleep(2.0)
settled = time.perf_counter()
while True:
    before = engine_cpu(engine)
    time.sleep(0.5)
    if engine_cpu(engine) - before < 0.02 or time.perf_counter() - settled > 20:
        break
rest_after = time.perf_counter() - settled + 2.0
last = {"screen": rss(os.getpid()), "engine": rss(engine)}
session.close()
print(json.dumps({"verdicts": verdicts, "all_steps": all_steps, "reasons": reasons_at,
                  "rerun": {k: statistics.median_low(v or [0]) for k, v in times.items()},
                  "rerun_max": {k: max(v or [0]) for k, v in times.items()},
                  "samples": {k: len(v) for k, v in times.items()},
                  "verdicts_cpu": verdicts_cpu, "all_cpu": all_cpu, "reasons_cpu": reasons_cpu,
                  "rerun_cpu": {k: statistics.median_low(v or [0]) for k, v in cpus.items()},
                  "rerun_reasons": {k: statistics.median_low(v or [(0, 0)])
                                    for k, v in reasons.items()},
                  "collect": max(collects or [0]), "first": first, "last": last,
                  "engine_max": max(engine_sizes or [0]), "engine_sizes": engine_sizes,
                  "order": order, "rest_after": rest_after,
                  "steps": len(steps)}))
"""


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _tree_pss(pid: int) -> int:
    """Proportional set size of ``pid`` and all its descendants, in bytes."""
    tree = _children()
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(tree.get(current, []))
        try:
            with open(f"/proc/{current}/smaps_rollup") as f:
                total += next(int(x.split()[1]) * 1024 for x in f if x.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total


def measure(command: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """Wall seconds, peak tree memory and exit code of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_pss(proc.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        print(f"    ! {' '.join(command[2:4])} exited {proc.returncode}: {err.strip()[-300:]}")
    return wall, peak, proc.returncode


def build(rung: str, folder: Path) -> Path:
    """The rung's ``.pt`` file (built once)."""
    path = folder / f"{rung}.pt"
    if not path.exists():
        import torch

        from benchmarks.models import conv_stack, transformer_encoder

        n = int(rung[1:])
        model = transformer_encoder(n) if rung[0] == "L" else conv_stack(n)
        torch.jit.save(model, str(path))
    return path


def run_rung(rung: str, model: Path, commands: list[str], repeat: int, work: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    fv = [sys.executable, "-m", "freezeview"]
    expect = work / f"{rung}.toml"
    if "check" in commands and not expect.exists():
        subprocess.run(
            [*fv, "check", str(model), "--write-expect", str(expect)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    argv = {
        "explain": [*fv, "explain", str(model)],
        "check": [*fv, "check", str(model), "--expect", str(expect)],
        "freeze": [*fv, "freeze", str(model), "-o", str(work / "out.pt"), "--force"],
        "export": [*fv, "export", str(model), "-o", str(work / "export"), "--force"],
    }
    base = [sys.executable, "-c", _TORCH, str(model)]
    runs: dict[str, list[tuple[float, int]]] = {k: [] for k in ["torch", "torch+save", *commands]}
    exported_ok: list[bool] = []
    for _ in range(repeat):
        for name in ["torch", "torch+save", *commands]:
            if name == "torch":
                command = base
            elif name == "torch+save":
                command = [*base, str(work / "torch.pt")]
            else:
                command = argv[name]
            wall, peak, code = measure(command, env)
            runs[name].append((wall, peak))
            if name == "export":
                page = work / "export" / "index.html"
                exported_ok.append(code == 0 and page.exists())
    med = {k: statistics.median(w for w, _ in v) for k, v in runs.items() if v}
    peak = {k: statistics.median(p for _, p in v) for k, v in runs.items() if v}
    print(
        f"  {rung}: torch load+freeze {med['torch']:.2f} s, {peak['torch'] / 2**20:.0f} MB; "
        f"+save {med['torch+save']:.2f} s"
    )
    for name in commands:
        ref = "torch+save" if name == "freeze" else "torch"
        extra = ""
        if name == "export":
            extra = "  pictures+index.html: " + ("yes" if all(exported_ok) else "NO")
        print(
            f"    {name:8s} {med[name]:7.2f} s  {med[name] / med[ref]:5.2f}x {ref:10s} "
            f"peak {peak[name] / 2**20:6.0f} MB  {peak[name] / peak['torch']:5.2f}x{extra}"
        )


def run_app(rung: str, model: Path, reruns: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    timing = [sys.executable, "-c", _TORCH + "\nimport time\n", str(model)]
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(timing, env=env, check=True, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    torch_wall = time.perf_counter() - t
    torch_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # torch's freeze of the loaded model: 7 freezes in a fresh process, before and again
    # after the app's run; the median of all 14 (one fresh process swings 0.4-0.7 s at
    # L12 on this machine).
    freeze_argv = [
        sys.executable,
        "-c",
        "import sys,time,warnings;warnings.simplefilter('ignore');import torch;"
        "m=torch.jit.load(sys.argv[1])\n"
        "for _ in range(7):\n"
        " t=time.perf_counter();p=time.process_time();torch.jit.freeze(m)\n"
        " print(time.perf_counter()-t, time.process_time()-p)",
        str(model),
    ]

    def torch_freezes() -> list[tuple[float, float]]:
        out = subprocess.run(freeze_argv, env=env, check=True, capture_output=True, text=True)
        return [tuple(map(float, line.split())) for line in out.stdout.split("\n") if line]

    freezes = torch_freezes()
    done = subprocess.run(
        [sys.executable, "-c", _APP, str(model), str(reruns)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    r = json.loads(done.stdout.strip().splitlines()[-1])
    freezes += torch_freezes()
    freeze_s = statistics.median(w for w, _ in freezes)
    freeze_cpu = statistics.median(c for _, c in freezes)
    mb = 2**20
    rerun, rerun_cpu = r["rerun"], r["rerun_cpu"]
    kinds = [k for k in ("r", "toggle", "toggle-new") if rerun.get(k)]
    slowest, samples = r["rerun_max"], r["samples"]
    reruns_text = ", ".join(
        f"re-run ({k}, {samples[k]}) {rerun[k]:.2f} s ({rerun[k] / freeze_s:.2f}x, "
        f"slowest {slowest[k] / freeze_s:.2f}x)"
        for k in kinds
    )
    print(
        f"  {rung} app: verdicts {r['verdicts']:.2f} s ({r['verdicts'] / torch_wall:.2f}x torch "
        f"load+freeze {torch_wall:.2f} s), all {r['steps']} steps {r['all_steps']:.2f} s "
        f"({r['all_steps'] / torch_wall:.2f}x); {reruns_text} of torch freeze {freeze_s:.2f} s; "
        f"a run's start on the screen (dropping the last run, a full collection): "
        f"{r['collect'] * 1000:.0f} ms"
    )
    cpu_text = ", ".join(
        f"re-run ({k}) {rerun_cpu[k]:.2f} ({rerun_cpu[k] / freeze_cpu:.2f}x)" for k in kinds
    )
    print(
        f"    CPU seconds, both processes: verdicts {r['verdicts_cpu']:.2f} "
        f"({r['verdicts_cpu'] / torch_cpu:.2f}x torch load+freeze {torch_cpu:.2f}), all steps "
        f"{r['all_cpu']:.2f} ({r['all_cpu'] / torch_cpu:.2f}x); {cpu_text} of torch freeze "
        f"{freeze_cpu:.2f}"
    )
    waited = r["rerun_reasons"]
    print(
        f"    reasons shown: first explain {r['reasons']:.2f} s (CPU {r['reasons_cpu']:.2f}); "
        + ", ".join(
            f"re-run ({k}) {waited[k][0]:.2f} s ({waited[k][0] / freeze_s:.2f}x), CPU "
            f"{waited[k][1]:.2f} ({waited[k][1] / freeze_cpu:.2f}x)"
            for k in kinds
            if k != "r"
        )
    )
    print(
        f"    memory after the first run: screen {r['first']['screen'] / mb:.0f} MB, engine "
        f"{r['first']['engine'] / mb:.0f} MB; after {reruns} re-runs: screen "
        f"{r['last']['screen'] / mb:.0f} MB, engine {r['last']['engine'] / mb:.0f} MB "
        f"({r['last']['engine'] / r['first']['engine'] - 1:+.1%}; at most "
        f"{r['engine_max'] / mb:.0f} MB, {r['engine_max'] / r['first']['engine'] - 1:+.1%}, "
        f"after a re-run; at rest: {r['rest_after']:.1f} s after the last)"
    )
    print(
        "    engine MB after each re-run: " + " ".join(f"{b / mb:.0f}" for b in r["engine_sizes"])
    )
    letters = {"r": "r", "toggle": "t", "toggle-new": "n"}
    print(
        "    re-runs in order (r, t toggle, n toggle-new), x torch freeze: "
        + " ".join(f"{letters[k]}{s / freeze_s:.2f}" for k, s in r["order"])
    )
    print(
        "    torch freezes, s (7 before the app's work, 7 after): "
        + " ".join(f"{w:.2f}" for w, _ in freezes)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--layers", default="1,12", help="transformer rungs (layers)")
    parser.add_argument("--blocks", default="8,512", help="conv stack rungs (blocks)")
    parser.add_argument("--commands", default="explain,check,freeze,export")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--app", action="store_true", help="also the app's engine work")
    parser.add_argument("--reruns", type=int, default=10)
    parser.add_argument("--models-dir", default=None, help="keep the .pt files here")
    args = parser.parse_args()
    rungs = [f"L{n}" for n in args.layers.split(",") if n] + [
        f"N{n}" for n in args.blocks.split(",") if n
    ]
    commands = [c for c in args.commands.split(",") if c]
    folder = Path(args.models_dir or tempfile.mkdtemp(prefix="fv-scaling-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, models in {folder}")
    for rung in rungs:
        model = build(rung, folder)
        with tempfile.TemporaryDirectory() as tmp:
            if commands:
                run_rung(rung, model, commands, args.repeat, Path(tmp))
        if args.app:
            run_app(rung, model, args.reruns)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
