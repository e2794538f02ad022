"""Fixtures for the optimisers: torch.optim.Adam and AdamW over three steps.

Each file holds init.<p> (the parameters before the first step), grad.<s>.<p>
(the gradient given at step s = 1..3; absent means no gradient, so the
parameter is skipped), param.<s>.<p> (the parameters after step s), the final
exp_avg.<p> / exp_avg_sq.<p> / step.<p>, and lr (the learning rate of each
step, exact in f32). Parameter "b" is excluded from weight decay; parameter
"c" has no gradient at step 2. The hyper-parameters are in the metadata and
in tests/unit/adam_test.cpp.
"""
import os

import torch

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
LRS = [2.0 ** -7, 2.0 ** -8, 2.0 ** -6]  # changes per step, as a schedule does
CASES = {
    "optim_adam": (torch.optim.Adam, dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    "optim_adamw": (torch.optim.AdamW, dict(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)),
}


def rnd(*shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) * 2 - 1) * scale


def run(name, optimiser, settings):
    init = {"w": rnd(4, 5, seed=101), "b": rnd(5, seed=102), "c": rnd(3, 2, seed=103)}
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    wd = settings["weight_decay"]
    opt = optimiser([{"params": [params["w"], params["c"]]},
                     {"params": [params["b"]], "weight_decay": 0.0}],
                    lr=LRS[0], **settings)
    out = {"init." + k: v for k, v in init.items()}
    out["lr"] = torch.tensor(LRS, dtype=torch.float32)
    for step in range(1, 4):
        for group in opt.param_groups:
            group["lr"] = LRS[step - 1]
        for i, (k, p) in enumerate(params.items()):
            if k == "c" and step == 2:
                p.grad = None
                continue
            # Gradients of mixed sizes, some tiny, so ε and the bias
            # corrections both matter.
            g = rnd(*p.shape, seed=200 + 10 * step + i, scale=10.0 ** (1 - step))
            p.grad = g.clone()
            out["grad.%d.%s" % (step, k)] = g
        opt.step()
        for k, p in params.items():
            out["param.%d.%s" % (step, k)] = p.detach().clone()
    for k, p in params.items():
        state = opt.state[p]
        out["exp_avg." + k] = state["exp_avg"]
        out["exp_avg_sq." + k] = state["exp_avg_sq"]
        out["step." + k] = torch.tensor([int(state["step"])], dtype=torch.int64)
    meta = dict(optimiser=optimiser.__name__, weight_decay=wd, torch=torch.__version__,
                **{k: v for k, v in settings.items() if k != "weight_decay"})
    safetensors_io.save(os.path.join(HERE, "fixtures", name + ".safetensors"), out, meta)


def generate(emit):
    for name, (optimiser, settings) in CASES.items():
        run(name, optimiser, settings)
