"""Fixtures for matmul, linear, element-wise arithmetic, reductions and views."""
import torch


def rnd(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * 2 - 1


def generate(emit):
    emit("matmul_2d", {"a": rnd(5, 7, seed=1), "b": rnd(7, 3, seed=2)}, lambda a, b: a @ b)
    emit("matmul_batched_broadcast", {"a": rnd(2, 3, 4, 5, seed=3), "b": rnd(3, 5, 6, seed=4)}, lambda a, b: a @ b)
    emit("matmul_transposed", {"a": rnd(6, 4, seed=5), "b": rnd(3, 6, seed=6)}, lambda a, b: a.t() @ b.t())
    emit("linear_bias", {"x": rnd(2, 5, 8, seed=7), "w": rnd(6, 8, seed=8), "b": rnd(6, seed=9)},
         lambda x, w, b: torch.nn.functional.linear(x, w, b))
    emit("linear_nobias", {"x": rnd(4, 8, seed=10), "w": rnd(3, 8, seed=11)},
         lambda x, w: torch.nn.functional.linear(x, w))
    emit("add_broadcast", {"a": rnd(3, 1, 5, seed=12), "b": rnd(4, 1, seed=13)}, lambda a, b: a + b)
    emit("sub_broadcast", {"a": rnd(3, 4, seed=14), "b": rnd(4, seed=15)}, lambda a, b: a - b)
    emit("mul_broadcast", {"a": rnd(2, 3, 4, seed=16), "b": rnd(2, 1, 4, seed=17)}, lambda a, b: a * b)
    emit("div_broadcast", {"a": rnd(3, 4, seed=18), "b": rnd(3, 1, seed=19).abs() + 0.5}, lambda a, b: a / b)
    emit("exp", {"a": rnd(3, 4, seed=20)}, torch.exp)
    emit("log", {"a": rnd(3, 4, seed=21).abs() + 0.1}, torch.log)
    emit("sqrt", {"a": rnd(3, 4, seed=22).abs() + 0.1}, torch.sqrt)
    emit("tanh", {"a": rnd(3, 4, seed=23) * 3}, torch.tanh)
    emit("pow", {"a": rnd(3, 4, seed=24).abs() + 0.1}, lambda a: a ** 2.5)
    emit("sum_dims", {"x": rnd(3, 4, 5, seed=25)}, lambda x: x.sum(dim=(0, 2), keepdim=True))
    emit("sum_leading", {"x": rnd(6, 5, seed=26)}, lambda x: x.sum(dim=0))
    emit("mean_last", {"x": rnd(3, 4, 5, seed=27)}, lambda x: x.mean(dim=-1))
    emit("max_dim1", {"x": rnd(3, 6, 4, seed=28)}, lambda x: x.max(dim=1).values)
    emit("views", {"x": rnd(2, 3, 4, seed=29)},
         lambda x: x.permute(2, 0, 1)[1:3].reshape(2, 6).t().unsqueeze(0).expand(3, 6, 2) * 1.0)
