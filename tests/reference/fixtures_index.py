"""Fixtures for embedding, cross_entropy, linear_cross_entropy, masked_fill, concat, split and gather."""
import torch
import torch.nn.functional as F


def rnd(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * 2 - 1


def ints(*shape, high, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g)


def cross_entropy_last_dim(z, t, **kw):
    """cmha's convention: classes on the last dim, so [B, T, C] flattens to [B·T, C]."""
    out = F.cross_entropy(z.reshape(-1, z.shape[-1]), t.reshape(-1), **kw)
    return out.reshape(t.shape) if kw.get("reduction") == "none" else out


def generate(emit):
    # ---- embedding: id 3 appears three times, id 1 twice, so the gradient sums rows.
    emit("embedding_repeated", {"w": rnd(10, 6, seed=101), "ids": torch.tensor([[1, 3, 3, 9], [0, 3, 1, 7]])},
         lambda w, ids: F.embedding(ids, w))

    # ---- cross_entropy: rows 2 and 5 are ignored (-100), class count 7.
    z = rnd(6, 7, seed=102) * 3
    t = torch.tensor([0, 6, -100, 3, 3, -100])
    for eps in (0.0, 0.1):
        for red in ("none", "sum", "mean"):
            emit(f"cross_entropy_{red}_ls{int(eps * 10)}", {"z": z, "t": t},
                 lambda z, t, red=red, eps=eps: F.cross_entropy(z, t, label_smoothing=eps, reduction=red))
    # A class index as ignore_index, and the [B, T, C] shape.
    emit("cross_entropy_ignore_class", {"z": z, "t": torch.tensor([0, 6, 2, 3, 2, 1])},
         lambda z, t: F.cross_entropy(z, t, ignore_index=2, label_smoothing=0.1))
    t3 = ints(2, 3, high=5, seed=103)
    t3[1, 2] = -100
    for red in ("none", "mean"):
        emit(f"cross_entropy_btc_{red}", {"z": rnd(2, 3, 5, seed=104) * 2, "t": t3},
             lambda z, t, red=red: cross_entropy_last_dim(z, t, label_smoothing=0.1, reduction=red))
    # ---- linear_cross_entropy: the output projection and the loss in one op;
    # every tenth row from 3 and from 9 is padding (ignore_index 0), 40 rows, 11 classes.
    t = torch.tensor([5, 1, 7, 0, 10, 2, 3, 9, 4, 0] * 4)
    for red in ("sum", "mean"):
        emit(f"linear_cross_entropy_{red}",
             {"x": rnd(40, 6, seed=300) * 2, "w": rnd(11, 6, seed=301), "t": t},
             lambda x, w, t, red=red: F.cross_entropy(x @ w.t(), t, ignore_index=0, label_smoothing=0.1,
                                                      reduction=red))

    # ---- masked_fill: mask [3, 1] broadcast over x [2, 3, 4].
    emit("masked_fill_broadcast", {"x": rnd(2, 3, 4, seed=105), "mask": torch.tensor([[True], [False], [True]])},
         lambda x, mask: x.masked_fill(mask, -1.5))

    # ---- concat along dim 0 and along a middle dim.
    emit("concat_dim0", {"a": rnd(2, 3, seed=106), "b": rnd(1, 3, seed=107), "c": rnd(3, 3, seed=108)},
         lambda a, b, c: torch.cat([a, b, c], dim=0))
    emit("concat_dim1", {"a": rnd(2, 3, 4, seed=109), "b": rnd(2, 1, 4, seed=110), "c": rnd(2, 2, 4, seed=111)},
         lambda a, b, c: torch.cat([a, b, c], dim=1))

    # ---- split [1, 3, 2] along dim 1; the pieces, flattened and scaled by 1, 2, 3, form the output.
    emit("split_uneven", {"x": rnd(2, 6, 3, seed=112)},
         lambda x: torch.cat([p.reshape(-1) * (k + 1) for k, p in enumerate(torch.split(x, [1, 3, 2], dim=1))]))

    # ---- gather: repeated indices along dim (so backward accumulates) and an
    # index smaller than x in the other dims.
    emit("gather_dim0", {"x": rnd(4, 5, seed=113), "index": torch.tensor([[3, 0, 3], [3, 1, 0], [0, 0, 2]])},
         lambda x, index: torch.gather(x, 0, index))
    emit("gather_dim_last", {"x": rnd(2, 3, 6, seed=114), "index": ints(2, 2, 8, high=6, seed=115)},
         lambda x, index: torch.gather(x, -1, index))
