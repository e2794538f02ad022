#!/usr/bin/env python3
"""Plain numpy reference for cp_als_bench: the same factored CP-ALS at the same size.

One layer of a BERT-base-sized attention (H = 12, D = 768, d_k = 64) decomposed
to rank 384 from a random start, as framework/compress/cp_als.cpp does it: the
tensor of per-head products T_i = W_Q^(i) W_K^(i)^T is never formed; the normal
equations (Hadamard products of the other factors' Grams, R x R) are solved in
double, columns are normalised after each step and the error comes from the
Grams and the mixing mode's MTTKRP.

Two formulations of the factor updates (--formulation):
  projected (default, cmha's since issue 18): each factor is kept as Y with
    W~ = W^T Y, so a mode costs three f32 GEMMs: Y = Z N^-1 ([Dk, R] x [R, R]),
    U = (W W^T) Y ([Dk, Dk] x [Dk, R], W W^T formed once) and the Gram Y^T U;
  direct (cmha's before): W~ = (W^T Z) N^-1 and U = W W~, four GEMMs a mode
    (W^T Z, x N^-1, the Gram W~^T W~, W W~).
Z is the MTTKRP before W^T: the other factor's image (W_K W~_K or W_Q W~_Q)
with each head's rows scaled by that head's mixing row. N^-1 comes from a
Cholesky factor (numpy has no dpotri: the factor's triangular inverse by
np.linalg.inv, then L^-T L^-1); the mixing mode's 12 right-hand sides are
solved against the normal matrix directly.

Weights: N(0, 1) times exp(-d/256) over the input dimension d (numpy's
generator, not cmha's, so the errors agree to about 3 digits, not bit for bit).

Prints one line per run, e.g.
  numpy cp_als: 100 iterations, 15.20 ms per iteration (median 15.00), relative error 0.4632
(the mean over the iterations first; cp_als_bench parses this line). The
thread count is the caller's: set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS. Leave
OMP_WAIT_POLICY unset: under passive, OpenBLAS's LAPACK runs 10x slower.

Run: OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 $(tests/bench/python/bench_python.sh) tests/bench/cp_als_numpy.py
         [iters] [runs] [--formulation projected|direct]
(the benchmark venv's numpy, pinned in tests/bench/python/requirements.txt;
CMHA_BENCH_PYTHON=debian for Debian's). Its first line names the
interpreter, numpy and the BLAS measured.
"""
import argparse
import sys
import time

import numpy as np

H, D, DK, R = 12, 768, 768, 384
dk = DK // H


def synthetic_layer(rng):
    scale = np.exp(-np.arange(D, dtype=np.float32) / 256.0).astype(np.float32)
    q = rng.standard_normal((DK, D), dtype=np.float32) * scale
    k = rng.standard_normal((DK, D), dtype=np.float32) * scale
    return q, k


def tensor_norm_sq(q, k):
    total = 0.0
    for i in range(H):
        qi = q[i * dk:(i + 1) * dk].astype(np.float64)
        ki = k[i * dk:(i + 1) * dk].astype(np.float64)
        total += np.sum((qi @ qi.T) * (ki @ ki.T))
    return total


def inverse_norms(g, lam):
    """Column norms from the Gram into lam; their inverses (0 for a zero column)."""
    lam[:] = np.sqrt(np.maximum(np.diag(g), 0.0))
    return np.where(lam > 0, 1.0 / np.where(lam > 0, lam, 1.0), 0.0)


def normalise(fs, g, lam):
    """Unit columns for the factor and its images in fs (in place), and its Gram."""
    inv = inverse_norms(g, lam)
    for f in fs:
        f *= inv.astype(f.dtype)
    g *= np.outer(inv, inv)


def spd_inverse(a):
    # Cholesky, then the inverse from it (cmha: dpotrf, a triangular inverse, dlauum).
    low = np.linalg.cholesky(a)
    li = np.linalg.inv(low)
    return li.T @ li


def gram(a, b):
    g = (a.T @ b).astype(np.float64)
    return 0.5 * (g + g.T)


def mixing_mttkrp(u, v):
    return (u.astype(np.float64) * v).reshape(H, dk, R).sum(axis=1)


def scale_head_rows(p, c):
    return (p.reshape(H, dk, R) * c[:, None, :]).reshape(DK, R)


def cp_als(q, k, iters, rng, formulation):
    qt, kt = np.ascontiguousarray(q.T), np.ascontiguousarray(k.T)
    pq, pk = q @ q.T, k @ k.T  # the projections W W^T, [Dk, Dk], once
    a = rng.standard_normal((D, R), dtype=np.float32)
    b = rng.standard_normal((D, R), dtype=np.float32)
    lam = np.ones(R)
    ga, gb = gram(a, a), gram(b, b)
    normalise([a], ga, lam)
    normalise([b], gb, lam)
    u, v = q @ a, k @ b
    norm_sq = tensor_norm_sq(q, k)
    inner = mixing_mttkrp(u, v)

    def update(wt, w, proj, image, other_gram, gc, c32):
        """One factor mode: the new image W W~ and Gram (unit columns)."""
        z = scale_head_rows(image, c32)
        inv = spd_inverse(gc * other_gram).astype(np.float32)
        if formulation == "projected":
            y = z @ inv
            u_new = proj @ y
            g = gram(y, u_new)
            normalise([y, u_new], g, lam)
        else:
            a_new = (wt @ z) @ inv
            g = gram(a_new, a_new)
            normalise([a_new], g, lam)
            u_new = w @ a_new
        return u_new, g

    times, err = [], None
    for _ in range(iters):
        t0 = time.perf_counter()
        # mixing: [H, R], double
        c = np.linalg.solve(ga * gb, inner.T).T
        gc = c.T @ c
        normalise([c], gc, lam)
        c32 = c.astype(np.float32)
        u, ga = update(qt, q, pq, v, gb, gc, c32)  # query factor
        v, gb = update(kt, k, pk, u, ga, gc, c32)  # key factor
        # error from the pieces (the MTTKRP is also the next mixing step's)
        inner = mixing_mttkrp(u, v)
        cross = np.sum(lam * c * inner)
        model = lam @ (ga * gb * gc) @ lam
        err = np.sqrt(max(0.0, norm_sq - 2.0 * cross + model) / norm_sq)
        times.append(time.perf_counter() - t0)
    return times, err


def blas_of_numpy():
    """numpy's BLAS as its build reports it (e.g. scipy-openblas 0.3.x, or Debian's openblas)."""
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001: numpy < 1.26 has no dicts mode
        return "BLAS unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("iters", nargs="?", type=int, default=100)
    p.add_argument("runs", nargs="?", type=int, default=1)
    p.add_argument("--formulation", choices=["projected", "direct"], default="projected")
    args = p.parse_args()
    print(f"numpy {np.__version__} ({blas_of_numpy()}), {sys.executable}", flush=True)
    for run in range(args.runs):
        rng = np.random.default_rng(100 + run)
        q, k = synthetic_layer(rng)
        times, err = cp_als(q, k, args.iters, rng, args.formulation)
        print("numpy cp_als: %d iterations, %.2f ms per iteration (median %.2f), relative error %.4f"
              % (args.iters, 1e3 * sum(times) / len(times), 1e3 * float(np.median(times)), err), flush=True)


if __name__ == "__main__":
    main()
