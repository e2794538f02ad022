"""Fixtures for soft_cross_entropy: F.cross_entropy with probability targets.

soft_cross_entropy_<reduction>_ls<k>: logits z [6, 7] and mixup-like targets
q [6, 7] (two classes mixed per row, one row one-hot, one row uniform), label
smoothing k/10. soft_cross_entropy_btc: [2, 3, 5] logits, classes last, as
cmha's convention; PyTorch wants them at dim 1, hence the reshape.
Both inputs are floating, so the fixtures hold the gradients of z and of q.
"""
import torch
import torch.nn.functional as F


def rnd(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * 2 - 1


def mixed_targets(rows, classes, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, classes, (rows,), generator=g)
    b = torch.randint(0, classes, (rows,), generator=g)
    lam = torch.rand(rows, generator=g)
    q = lam[:, None] * F.one_hot(a, classes).float() + (1 - lam[:, None]) * F.one_hot(b, classes).float()
    q[0] = F.one_hot(torch.tensor(3), classes).float()
    q[1] = torch.full((classes,), 1.0 / classes)
    return q


def last_dim(z, q, **kw):
    out = F.cross_entropy(z.reshape(-1, z.shape[-1]), q.reshape(-1, q.shape[-1]), **kw)
    return out.reshape(z.shape[:-1]) if kw.get("reduction") == "none" else out


def generate(emit):
    z = rnd(6, 7, seed=201) * 3
    q = mixed_targets(6, 7, seed=202)
    for eps in (0.0, 0.1):
        for red in ("none", "sum", "mean"):
            emit(f"soft_cross_entropy_{red}_ls{int(eps * 10)}", {"z": z, "q": q},
                 lambda z, q, red=red, eps=eps: F.cross_entropy(z, q, label_smoothing=eps, reduction=red))
    emit("soft_cross_entropy_btc", {"z": rnd(2, 3, 5, seed=203) * 2, "q": mixed_targets(6, 5, seed=204).reshape(2, 3, 5)},
         lambda z, q: last_dim(z, q, label_smoothing=0.1))
