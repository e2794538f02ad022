"""Fixtures for SGD, gradient-norm clipping and the learning-rate schedules.

optim_sgd_<case>: torch.optim.SGD over three steps, laid out as the Adam
fixtures (fixtures_optim.py): init.<p>, grad.<s>.<p> (absent: no gradient at
step s), param.<s>.<p>, the final momentum_buffer.<p> (absent: none), lr.
Parameter "b" is excluded from weight decay; "c" has no gradient at step 1,
so its momentum buffer starts at step 2. Hyper-parameters: the metadata and
tests/unit/optim_extras_test.cpp.

optim_clip_grad_norm: torch.nn.utils.clip_grad_norm_ on three gradients
(grad.<p>, clipped.<p>, norm) with max_norm 1.0; parameter "d" has no
gradient and is skipped.

optim_schedules: <name>.update (i64) and <name>.lr (f32) for each schedule
case, from the upstream formulas written out below (fairseq's inverse_sqrt
step_update, Vaswani's noam, timm's CosineLRScheduler._get_lr without
cycles), plus cosine_torch from torch.optim.lr_scheduler.CosineAnnealingLR
itself, which timm's cosine equals when there is no warmup.
"""
import math
import os

import torch

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
LRS = [2.0 ** -4, 2.0 ** -5, 2.0 ** -3]  # changes per step, as a schedule does
SGD_CASES = {
    "optim_sgd_momentum": dict(momentum=0.9, dampening=0.25, weight_decay=0.01, nesterov=False),
    "optim_sgd_nesterov": dict(momentum=0.8, dampening=0.0, weight_decay=0.05, nesterov=True),
    "optim_sgd_plain": dict(momentum=0.0, dampening=0.0, weight_decay=0.1, nesterov=False),
}


def rnd(*shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1) * scale


def save(name, tensors, meta=None):
    safetensors_io.save(os.path.join(HERE, "fixtures", name + ".safetensors"), tensors, meta)


def sgd(name, settings):
    init = {"w": rnd(4, 5, seed=301), "b": rnd(5, seed=302), "c": rnd(3, 2, seed=303)}
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.SGD([{"params": [params["w"], params["c"]]},
                           {"params": [params["b"]], "weight_decay": 0.0}], lr=LRS[0], **settings)
    out = {"init." + k: v for k, v in init.items()}
    out["lr"] = torch.tensor(LRS, dtype=torch.float32)
    for step in range(1, 4):
        for group in opt.param_groups:
            group["lr"] = LRS[step - 1]
        for i, (k, p) in enumerate(params.items()):
            if k == "c" and step == 1:
                p.grad = None
                continue
            g = rnd(*p.shape, seed=400 + 10 * step + i, scale=2.0 ** (1 - step))
            p.grad = g.clone()
            out["grad.%d.%s" % (step, k)] = g
        opt.step()
        for k, p in params.items():
            out["param.%d.%s" % (step, k)] = p.detach().clone()
    for k, p in params.items():
        buf = opt.state[p].get("momentum_buffer")
        if buf is not None:
            out["momentum_buffer." + k] = buf.clone()
    save(name, out, dict(optimiser="SGD", torch=torch.__version__, **settings))


def clip():
    grads = {"w": rnd(4, 5, seed=501, scale=0.7), "b": rnd(5, seed=502, scale=0.3),
             "c": rnd(3, 2, seed=503, scale=0.5)}
    params = {k: torch.zeros(v.shape, requires_grad=True) for k, v in grads.items()}
    params["d"] = torch.zeros(2, requires_grad=True)  # no gradient
    for k, g in grads.items():
        params[k].grad = g.clone()
    norm = torch.nn.utils.clip_grad_norm_(list(params.values()), max_norm=1.0)
    out = {"grad." + k: g for k, g in grads.items()}
    out.update({"clipped." + k: params[k].grad.clone() for k in grads})
    out["norm"] = norm.reshape(1).float()
    save("optim_clip_grad_norm", out, dict(max_norm=1.0, torch=torch.__version__))


# ---- schedules: the upstream formulas (update = updates already applied) ----

def inverse_sqrt(u, lr, warmup_updates, warmup_init_lr):
    # fairseq InverseSquareRootSchedule.step_update(num_updates)
    lr_step = (lr - warmup_init_lr) / warmup_updates
    decay_factor = lr * warmup_updates ** 0.5
    if u < warmup_updates:
        return warmup_init_lr + u * lr_step
    return decay_factor * u ** -0.5


def noam(u, factor, d_model, warmup):
    step = u + 1  # Vaswani's step_num counts the update being taken from 1
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def timm_cosine(t, lr, t_initial, lr_min, warmup_t, warmup_lr_init, warmup_prefix):
    # timm CosineLRScheduler._get_lr with cycle_mul = cycle_decay = cycle_limit = k = 1
    if t < warmup_t:
        return warmup_lr_init + t * (lr - warmup_lr_init) / warmup_t
    if warmup_prefix:
        t = t - warmup_t
    i = t // t_initial
    t_curr = t - t_initial * i
    if i < 1:
        return lr_min + 0.5 * (lr - lr_min) * (1 + math.cos(math.pi * t_curr / t_initial))
    return lr_min


def schedules():
    cases = {
        # fairseq transformer_wmt_en_de recipe: lr 5e-4, 4000 warmup updates from 1e-7
        "inverse_sqrt": (lambda u: inverse_sqrt(u, 5e-4, 4000, 1e-7),
                         [0, 1, 2, 1000, 3999, 4000, 4001, 10000, 16000, 100000]),
        "noam": (lambda u: noam(u, 2.0, 512, 4000), [0, 1, 2, 1000, 3998, 3999, 4000, 10000, 100000]),
        # DeiT: per epoch, 5 warmup epochs from 1e-6, 300 epochs, min 1e-5, lr 5e-4·512/512
        "cosine_deit": (lambda e: timm_cosine(e, 5e-4, 300, 1e-5, 5, 1e-6, False),
                        [0, 1, 4, 5, 6, 150, 299, 300, 309]),
        # per update, warmup counted before the cosine (warmup_prefix)
        "cosine_prefix": (lambda u: timm_cosine(u, 1e-3, 1000, 1e-5, 100, 0.0, True),
                          [0, 50, 99, 100, 101, 600, 1099, 1100, 1200]),
    }
    out = {}
    for name, (fn, points) in cases.items():
        out[name + ".update"] = torch.tensor(points, dtype=torch.int64)
        out[name + ".lr"] = torch.tensor([fn(u) for u in points], dtype=torch.float32)
    # torch's own cosine annealing (recursive form, stepped) over 0..20 with T_max 16.
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=16, eta_min=0.001)
    lrs = []
    for _ in range(17):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    out["cosine_torch.update"] = torch.arange(17, dtype=torch.int64)
    out["cosine_torch.lr"] = torch.tensor(lrs, dtype=torch.float32)
    save("optim_schedules", out, dict(torch=torch.__version__))


def generate(emit):
    for name, settings in SGD_CASES.items():
        sgd(name, settings)
    clip()
    schedules()
