"""Benchmark the HDP assortative MMSB (issue 26's targets): lap time, memory, kernel speed, link prediction, scaling.

The graphs are generated (``bnpvi.data.graph_toy``): the toy of ``data=toy`` (200 nodes, 6 communities,
Dir(0.05) memberships, 10 % of the edges and as many non-edges held out), and a graph the size of the
source's co-authorship network (Stephenson 2015 §7.2: ca-GrQc's largest component, 4,158 nodes; its
26,850 edges are taken as directed pairs, i.e. ~13,425 undirected edges): 20 communities, Dir(0.05)
memberships, degree-corrected by node activities drawn from a Pareto law of exponent 2.5 (density ∝
θ^-2.5 on θ ≥ 1, so heavy-tailed degrees), the community strengths scaled so that the edge count hits
the target, ε = 1e-5, undirected, 10 % held out.

Section "lap" (co-authorship size, 300 batches, K = 20, memoized VB without moves, in a child process):
seconds per lap (laps 2.. of ``--laps``), peak memory (the child's max RSS), and the kernel's pairs per
second on the whole graph as one batch. Targets: under 2 s per lap, under 500 MB.

Section "links" (the toy, and the co-authorship-size graph): held-out AUC and average precision of bnpvi
(toy: ``model=hdp_mmsb`` defaults, memo from K = 20 with merge and delete; co-authorship size: K = 20
without moves, ``--laps`` laps), against graspologic's ``DCSBMEstimator`` with K blocks fitted on the
training adjacency matrix (the held-out pairs are non-edges there; its blocks from its own Gaussian mixture on
the spectral embedding, or, when a block comes out empty, from k-means on that embedding), and the
Adamic-Adar index of
(``loops=True``: a block of one node would otherwise have no pair and fail; the graphs have no self-loop, so
the diagonal only adds zeros to the within-block counts)
networkx on the training graph; and the "oracle" score of the generating parameters
(ε + Σ_k π_ik π_jk (φ_k − ε) with the true π and φ). Target: bnpvi's AUC ≥ the DCSBM's.

Section "scaling": seconds per lap (memo, K = 20, no moves, ``--scaling-batches`` batches) on sparse
generated graphs of ``--sizes`` nodes (average degree ~6.5 like the co-authorship graph); the fitted
exponent of N (least squares of log time on log N). Target: 1.8-2.2 (the all-pairs step is O(N² K)).

Section "moves" (not in the default sections; the co-authorship-size graph, 300 batches, K = 20, memo with
merge and delete from lap ``--moves-from``, ``--moves-laps`` laps, in a child process): per lap the seconds, the
peak RSS within the lap, K, the ELBO and the moves accepted; ``--events-out`` keeps them with every move's
gain (moves.csv's rows) as JSON, to compare two versions of the code on the same run.

Usage::

    python scripts/bench_mmsb.py                  # everything, full sizes
    python scripts/bench_mmsb.py --quick          # small sizes, few laps: a smoke run
    python scripts/bench_mmsb.py --sections lap scaling
    python scripts/bench_mmsb.py --sections moves --events-out moves.json
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bnpvi.data.graph import write_graph  # noqa: E402
from bnpvi.data.graph_in import split_heldout  # noqa: E402
from bnpvi.data.graph_toy import ensure_toy_graph, make_ammsb_graph  # noqa: E402
from bnpvi.data.store import BatchStore  # noqa: E402
from bnpvi.metrics import average_precision, roc_auc  # noqa: E402

COAUTH_NODES, COAUTH_EDGES = 4158, 13425
TOY_STRENGTHS = np.linspace(0.5, 0.9, 6)


def generated_graph(path: Path, n_nodes: int, n_edges: int, n_batches: int, seed: int = 0, K: int = 20) -> dict:
    """Write a degree-corrected aMMSB graph with about ``n_edges`` undirected edges (module docstring)."""
    options = dict(concentration=0.05, epsilon=1e-5, seed=seed, activity_exponent=2.5)
    trial = np.full(K, 0.02)
    src, _, _ = make_ammsb_graph(n_nodes, K, strengths=trial, **options)
    strengths = np.minimum(trial * n_edges / max(src.size, 1), 1.0)
    src, dst, pi = make_ammsb_graph(n_nodes, K, strengths=strengths, **options)
    src, dst, held = split_heldout(src, dst, n_nodes, False, 0.1, seed)
    write_graph(path, np.concatenate([src, dst]), np.concatenate([dst, src]), n_nodes,
                [str(i) for i in range(n_nodes)], False, n_batches=n_batches, heldout=held,
                labels=np.argmax(pi, axis=1), memberships=pi, source="bench_mmsb degree-corrected aMMSB")
    return {"strengths": strengths, "edges": int(src.size + held[2].sum())}


def build(path: Path, K: int, model: str = "hdp_mmsb", seed: int = 0, init: str = "kmeanspp", moves_start_lap: int = 60):
    """(store, model, initial globals, ids, rng) as bnpvi-train builds them."""
    from omegaconf import OmegaConf

    from bnpvi.alloc import FiniteMMSBAlloc, HDPMMSBAlloc
    from bnpvi.learn.build import build_model
    from bnpvi.learn.init import initial_stats
    from bnpvi.stats import ClusterIds

    store = BatchStore.open(path)
    alloc = HDPMMSBAlloc(moves_start_lap=moves_start_lap) if model == "hdp_mmsb" else FiniteMMSBAlloc()
    cfg = OmegaConf.create({"obs": {"_target_": "bnpvi.obs.LinkStrength.from_config", "lam1": 10.0, "lam0": 1.0}})
    mdl = build_model(cfg, alloc, store.kind, store.D, None)
    rng = np.random.default_rng(seed)
    stats = initial_stats(mdl, store, OmegaConf.create({"name": init, "K": K, "kmeans_iters": None}), rng, K)
    return store, mdl, mdl.global_step(stats), ClusterIds.first(K), rng


def train(path: Path, K: int, laps: int, moves: bool, seed: int = 0, moves_start_lap: int = 60,
          on_lap=None) -> tuple:
    """Memoized VB (with merge and delete when ``moves``, from lap ``moves_start_lap``) for ``laps`` laps;
    (model, globals, store, lap seconds). ``on_lap(alg, result, seconds)``, if given, is called after every lap."""
    from omegaconf import OmegaConf

    from bnpvi.learn.memo import MemoizedVB

    store, model, globals_, ids, rng = build(path, K, seed=seed, moves_start_lap=moves_start_lap)
    move_cfg = None
    if moves:
        from hydra import compose, initialize_config_module

        from bnpvi.config import register_configs
        register_configs()
        with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
            move_cfg = compose(config_name="train", overrides=["model=hdp_mmsb"]).moves
    alg = MemoizedVB(model, store, OmegaConf.create({"n_laps": laps, "converge_thr": 0.0}), rng, globals_, ids,
                     moves=move_cfg)
    times, cpu, start, start_cpu = [], [], time.perf_counter(), time.process_time()
    previous = None
    while alg.lap < laps:
        result = alg.step()
        if result is not None:
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            if on_lap is not None:
                on_lap(alg, result, times[-1])
            start, start_cpu = time.perf_counter(), time.process_time()
            if moves and previous is not None and abs(result.elbo - previous) < 1e-7 * abs(previous) \
                    and not any(v for k, v in result.moves.items() if k.endswith("accepted")) \
                    and not alg.moves.pending(alg):
                break
            previous = result.elbo
    train.cpu = cpu  # CPU seconds of each lap (all threads), beside the wall-clock ones
    return model, alg.globals, store, times


def score_bnpvi(model, globals_, store) -> tuple[float, float]:
    from bnpvi.learn.links import evaluate_links
    out = evaluate_links(model, globals_, store)
    return out["heldout_auc"], out["heldout_ap"]


def score_peers(store, K: int) -> dict:
    """AUC and AP of the DCSBM (graspologic) and Adamic-Adar (networkx) on the store's held-out pairs."""
    import networkx as nx
    import scipy.sparse as sp

    graph = store.read_all()
    N = graph.n_nodes
    A = sp.csr_matrix((np.ones(graph.indices.shape[0]), graph.indices, graph.indptr), shape=(N, N))
    src, dst, value = store.heldout_pairs()
    out = {}
    G = nx.from_scipy_sparse_array(A)
    aa = np.array([p for _, _, p in nx.adamic_adar_index(G, list(zip(src.tolist(), dst.tolist())))])
    out["adamic-adar"] = (roc_auc(value, aa), average_precision(value, aa))
    try:
        from graspologic.models import DCSBMEstimator
    except ImportError as err:
        out["dcsbm"] = f"skipped: {err}"
        return out
    dense = A.toarray()
    try:  # graspologic's own communities: a Gaussian mixture of K components on the spectral embedding
        est = DCSBMEstimator(directed=store.directed, loops=True, min_comm=K, max_comm=K).fit(dense)
        name = "dcsbm"
    except (ZeroDivisionError, ValueError):  # a component came out empty: k-means on that embedding instead
        from graspologic.embed import AdjacencySpectralEmbed
        from sklearn.cluster import KMeans

        X = AdjacencySpectralEmbed().fit_transform(dense)
        X = np.hstack(X) if isinstance(X, tuple) else X
        y = KMeans(K, n_init=10, random_state=0).fit_predict(X)
        est = DCSBMEstimator(directed=store.directed, loops=True).fit(dense, y=y)
        name = "dcsbm (k-means blocks)"
    p = est.p_mat_[src, dst]
    out[name] = (roc_auc(value, p), average_precision(value, p))
    return out


def oracle(store, strengths: np.ndarray, epsilon: float) -> tuple[float, float]:
    pi = store.memberships()
    src, dst, value = store.heldout_pairs()
    p = epsilon + np.einsum("pk,pk,k->p", pi[src], pi[dst], strengths - epsilon)
    return roc_auc(value, p), average_precision(value, p)


# ---------------------------------------------------------------- sections
def section_lap(args, tmp: Path) -> list[tuple]:
    path = tmp / "coauth.h5"
    generated_graph(path, args.nodes, args.edges, args.batches)
    child = subprocess.run([sys.executable, __file__, "--child-lap", str(path), "--laps", str(args.laps)],
                           capture_output=True, text=True, check=True)
    got = json.loads(child.stdout.strip().splitlines()[-1])
    rows = [("seconds per lap (K=20, %d batches, laps 2-%d)" % (args.batches, args.laps), f"{got['lap_s']:.2f}",
             "< 2"),
            ("CPU seconds per lap (all threads; the machine is shared)", f"{got['lap_cpu_s']:.2f}", ""),
            ("peak memory (MB, peak RSS of the training process)", f"{got['rss_mb']:.0f}", "< 500"),
            ("kernel pairs per second (whole graph, one batch, K=20)", f"{got['pairs_per_s']:.3g}", "")]
    return rows


def child_lap(path: Path, laps: int) -> None:
    """In a child process: laps of memo at K = 20 and the kernel's speed; one line of JSON."""
    from bnpvi.kernels.mmsb import pair_step

    model, globals_, store, times = train(path, 20, laps, moves=False)
    graph = store.read_all()
    P = model.alloc.membership_logs(globals_.alloc)
    start = time.perf_counter()
    pair_step(P, np.full(P.shape[1], -0.1), np.full(P.shape[1], -2.0), 1e-5, graph)
    kernel_s = time.perf_counter() - start
    later = slice(1, None) if len(times) > 1 else slice(None)
    print(json.dumps({"lap_s": float(np.mean(times[later])), "lap_cpu_s": float(np.mean(train.cpu[later])),
                      "rss_mb": peak_rss_mb(),
                      "pairs_per_s": graph.n_pairs / kernel_s}))


def section_moves(args, tmp: Path) -> list[tuple]:
    path = tmp / "coauth.h5"
    generated_graph(path, args.nodes, args.edges, args.batches)
    child = subprocess.run([sys.executable, __file__, "--child-moves", str(path), "--moves-laps", str(args.moves_laps),
                            "--moves-from", str(args.moves_from)], capture_output=True, text=True, check=True)
    got = json.loads(child.stdout.strip().splitlines()[-1])
    if args.events_out:
        Path(args.events_out).write_text(json.dumps(got, indent=1))
    rows = [(f"lap {row['lap']}", f"{row['s']:.1f}", f"{row['rss_mb']:.0f}", row["K"], f"{row['elbo']:.10g}",
             row["moves"]) for row in got["laps"]]
    rows.append(("whole run", "", f"{got['rss_mb']:.0f}", "", "", ""))
    return rows


def child_moves(path: Path, laps: int, moves_from: int) -> None:
    """In a child process: memo at K = 20 with merge and delete from lap ``moves_from``; per lap the wall
    seconds, the peak RSS within the lap (VmHWM reset at each lap's start), K, the ELBO and the moves;
    then every move event. One line of JSON."""
    rows = []

    def on_lap(alg, result, seconds):
        done = {k: v for k, v in result.moves.items() if v}
        rows.append({"lap": result.lap, "s": seconds, "rss_mb": peak_rss_mb(), "K": result.K, "elbo": result.elbo,
                     "moves": " ".join(f"{k}={v}" for k, v in sorted(done.items()))})
        events[:] = [vars(e) for e in alg.moves.events]
        reset_peak_rss()

    events: list = []
    reset_peak_rss()
    train(path, 20, laps, moves=True, moves_start_lap=moves_from, on_lap=on_lap)
    print(json.dumps({"laps": rows, "events": events, "rss_mb": max(row["rss_mb"] for row in rows)}))


def reset_peak_rss() -> None:
    """Start this process's peak resident memory (VmHWM) afresh (Linux: ``/proc/self/clear_refs``)."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM; unlike ru_maxrss it starts afresh at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def section_links(args, tmp: Path) -> list[tuple]:
    rows = []
    toy = ensure_toy_graph(n_nodes=args.toy_nodes, seed=args.seed, cache_dir=tmp)
    coauth = tmp / "coauth_links.h5"
    info = generated_graph(coauth, args.nodes, args.edges, args.batches, seed=args.seed)
    for name, path, K, laps, moves, strengths, eps in (
            ("toy", toy, 20, args.toy_laps, True, TOY_STRENGTHS, 1e-4),
            ("co-authorship size", coauth, 20, args.laps, False, info["strengths"], 1e-5)):
        start = time.perf_counter()
        model, globals_, store, times = train(path, K, laps, moves=moves, seed=args.seed)
        seconds = time.perf_counter() - start
        auc, ap = score_bnpvi(model, globals_, store)
        rows.append((f"{name}: bnpvi (K={globals_.K}, {len(times)} laps, {seconds:.0f} s)", f"{auc:.4f}", f"{ap:.4f}"))
        for peer, result in score_peers(store, 6 if name == "toy" else 20).items():
            if isinstance(result, str):
                rows.append((f"{name}: {peer}", result, ""))
            else:
                rows.append((f"{name}: {peer}", f"{result[0]:.4f}", f"{result[1]:.4f}"))
        o_auc, o_ap = oracle(store, strengths, eps)
        rows.append((f"{name}: oracle (generating π, φ)", f"{o_auc:.4f}", f"{o_ap:.4f}"))
        store.close()
    return rows


def section_scaling(args, tmp: Path) -> list[tuple]:
    rows, sizes, seconds = [], [], []
    for N in args.sizes:
        path = tmp / f"scale_{N}.h5"
        generated_graph(path, N, int(round(N * COAUTH_EDGES / COAUTH_NODES)), args.scaling_batches)
        child = subprocess.run([sys.executable, __file__, "--child-lap", str(path), "--laps", str(args.scaling_laps)],
                               capture_output=True, text=True, check=True)
        got = json.loads(child.stdout.strip().splitlines()[-1])
        sizes.append(N)
        seconds.append(got["lap_cpu_s"])
        rows.append((f"N = {N} ({args.scaling_batches} batches)", f"{got['lap_s']:.2f}", f"{got['lap_cpu_s']:.2f}",
                     f"{got['rss_mb']:.0f}"))
    slope = float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0]) if len(sizes) > 1 else float("nan")
    rows.append(("fitted exponent of N, from CPU seconds (target 1.8-2.2)", "", f"{slope:.2f}", ""))
    for (n0, s0), (n1, s1) in zip(zip(sizes, seconds), zip(sizes[1:], seconds[1:])):
        # the lap's O(N K) work per batch weighs on the small graphs; between larger ones the O(N² K) pairs rule
        rows.append((f"  exponent between N = {n0} and {n1}", "", f"{np.log(s1 / s0) / np.log(n1 / n0):.2f}", ""))
    return rows


def table(title: str, header: tuple, rows: list[tuple]) -> None:
    width = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print(f"\n## {title}\n")
    for r in [header, tuple("-" * w for w in width)] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, width)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=["lap", "links", "scaling"],
                        choices=["lap", "moves", "links", "scaling"])
    parser.add_argument("--quick", action="store_true", help="small sizes and few laps (a smoke run)")
    parser.add_argument("--nodes", type=int, default=COAUTH_NODES)
    parser.add_argument("--edges", type=int, default=COAUTH_EDGES, help="undirected edges of the generated graph")
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--laps", type=int, default=30)
    parser.add_argument("--toy-nodes", type=int, default=200)
    parser.add_argument("--toy-laps", type=int, default=500)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--scaling-batches", type=int, default=20)
    parser.add_argument("--scaling-laps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--moves-from", type=int, default=3, help="section moves: model.moves_start_lap")
    parser.add_argument("--moves-laps", type=int, default=6, help="section moves: laps")
    parser.add_argument("--events-out", default=None, help="section moves: write the laps and move events (JSON) here")
    parser.add_argument("--child-lap", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-moves", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_lap:
        child_lap(Path(args.child_lap), args.laps)
        return
    if args.child_moves:
        child_moves(Path(args.child_moves), args.moves_laps, args.moves_from)
        return
    if args.quick:
        args.nodes, args.edges, args.batches, args.laps = 800, 2600, 40, 3
        args.toy_laps, args.sizes, args.scaling_laps = 150, [250, 500, 1000], 2
    print(f"# bench_mmsb on {platform.node()} ({platform.processor() or platform.machine()}), "
          f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}" + ("  [--quick]" if args.quick else ""))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "lap" in args.sections:
            table(f"lap: generated graph of {args.nodes} nodes, ~{args.edges} undirected edges", ("what", "value",
                                                                                                   "target"),
                  section_lap(args, tmp))
        if "moves" in args.sections:
            table(f"moves: generated graph of {args.nodes} nodes, merge and delete from lap {args.moves_from}",
                  ("lap", "s", "peak RSS MB", "K", "ELBO", "moves"), section_moves(args, tmp))
        if "links" in args.sections:
            table("links: held-out link prediction", ("method", "AUC", "AP"), section_links(args, tmp))
        if "scaling" in args.sections:
            table("scaling: seconds per lap at K = 20", ("graph", "s/lap", "CPU s/lap", "peak RSS MB"), section_scaling(args, tmp))


if __name__ == "__main__":
    main()
