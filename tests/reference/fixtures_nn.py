"""Fixtures for softmax, log_softmax, layer_norm, relu, gelu and collaborative_queries.

dropout has none: its mask comes from our own Philox stream, so it is tested
by its statistics and invariants in tests/unit/nn_ops_test.cpp instead.
"""
import torch
import torch.nn.functional as F


def rnd(*shape, seed, scale=1.0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1) * scale + shift


# Collaborative attention's per-head queries with the content-bias columns:
# q [B, Tq, D~k], mixing [H, D~k] -> [B, H, Tq, D~k + H].
def collaborative_queries(q, m, scale=0.37):
    B, Tq, Dk = q.shape
    H = m.shape[0]
    mixed = scale * q.unsqueeze(1) * m.view(1, H, 1, Dk)
    onehot = (scale * torch.eye(H)).view(1, H, 1, H).expand(B, H, Tq, H)
    return torch.cat([mixed, onehot], dim=-1)


def generate(emit):
    emit("softmax_last", {"x": rnd(3, 5, seed=101, scale=3)}, lambda x: torch.softmax(x, dim=-1))
    emit("softmax_dim1", {"x": rnd(2, 3, 4, seed=102, scale=3)}, lambda x: torch.softmax(x, dim=1))
    emit("log_softmax_last", {"x": rnd(4, 6, seed=103, scale=3)}, lambda x: torch.log_softmax(x, dim=-1))
    emit("log_softmax_dim0", {"x": rnd(3, 4, 5, seed=104, scale=3)}, lambda x: torch.log_softmax(x, dim=0))
    emit("layer_norm_affine",
         {"x": rnd(2, 3, 8, seed=105, scale=2, shift=0.5), "w": rnd(8, seed=106, shift=1.0), "b": rnd(8, seed=107)},
         lambda x, w, b: F.layer_norm(x, (8,), w, b, eps=1e-5))
    emit("layer_norm_plain", {"x": rnd(4, 7, seed=108, scale=3)}, lambda x: F.layer_norm(x, (7,), eps=1e-5))
    emit("layer_norm_weight_only", {"x": rnd(5, 6, seed=109), "w": rnd(6, seed=110, shift=1.0)},
         lambda x, w: F.layer_norm(x, (6,), w, None, eps=1e-3))
    emit("relu", {"x": rnd(4, 6, seed=111, scale=2)}, torch.relu)
    emit("gelu_erf", {"x": rnd(4, 6, seed=112, scale=5)}, lambda x: F.gelu(x))
    emit("gelu_tanh", {"x": rnd(4, 6, seed=113, scale=5)}, lambda x: F.gelu(x, approximate="tanh"))
    emit("collaborative_queries", {"q": rnd(2, 5, 6, seed=114, scale=2), "m": rnd(3, 6, seed=115, shift=0.5)},
         collaborative_queries)
