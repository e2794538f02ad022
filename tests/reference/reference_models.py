"""PyTorch reference implementations of cmha's layers and models.

They mirror framework/nn/ name for name (parameter names are the interface),
and implement collaborative, talking-heads and grouped attention here, since
PyTorch 1.13 has none of them. Used by fixtures_models.py and tests/bench.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, h):  # [B, T, H·d] -> [B, H, T, d]
    b, t, _ = x.shape
    return x.view(b, t, h, -1).permute(0, 2, 1, 3)


class Attention(nn.Module):
    """concat | collaborative | talking_heads | grouped, as in framework/nn/attention/."""

    def __init__(self, kind, d_model, heads, key_dim=0, value_dim=0, bias=True, kv_heads=1, dropout=0.0):
        super().__init__()
        self.kind, self.h = kind, heads
        self.dk_total = key_dim or d_model
        self.dv_total = value_dim or d_model
        self.kv_heads = kv_heads
        self.dropout = dropout
        h, dk = heads, self.dk_total
        if kind == "collaborative":
            self.scale = 1.0 / math.sqrt(d_model / h)
            self.query = nn.Linear(d_model, dk, bias=False)
            self.key = nn.Linear(d_model, dk, bias=False)
            self.mixing = nn.Parameter(torch.zeros(h, dk))
            self.content_bias = nn.Linear(d_model, h, bias=False)
            self.value = nn.Linear(d_model, self.dv_total, bias=bias)
        elif kind == "grouped":
            d = dk // h
            self.scale = 1.0 / math.sqrt(d)
            self.query = nn.Linear(d_model, dk, bias=bias)
            self.key = nn.Linear(d_model, kv_heads * d, bias=bias)
            self.value = nn.Linear(d_model, kv_heads * (self.dv_total // h), bias=bias)
        else:
            self.scale = 1.0 / math.sqrt(dk / h)
            self.query = nn.Linear(d_model, dk, bias=bias)
            self.key = nn.Linear(d_model, dk, bias=bias)
            self.value = nn.Linear(d_model, self.dv_total, bias=bias)
            if kind == "talking_heads":
                self.logit_mixing = nn.Parameter(torch.eye(h))
                self.weight_mixing = nn.Parameter(torch.eye(h))
        self.out = nn.Linear(self.dv_total, d_model, bias=bias)

    def forward(self, x, y, key_padding=None, causal=False):
        b, tq, _ = x.shape
        tk = y.shape[1]
        h = self.h
        if self.kind == "collaborative":
            q = self.query(x)                                              # [B, Tq, D̃k]
            k = self.key(y)                                                # [B, Tk, D̃k]
            qh = q.unsqueeze(1) * (self.mixing * self.scale).view(1, h, 1, -1)
            scores = qh @ k.unsqueeze(1).transpose(-1, -2)                 # [B, H, Tq, Tk]
            scores = scores + (self.content_bias(y) * self.scale).transpose(1, 2).unsqueeze(2)
            v = split_heads(self.value(y), h)
        elif self.kind == "grouped":
            g, r = self.kv_heads, h // self.kv_heads
            q = split_heads(self.query(x), h) * self.scale
            k = split_heads(self.key(y), g)                                # [B, G, Tk, d]
            v = split_heads(self.value(y), g)
            k = k.repeat_interleave(r, dim=1)                              # [B, H, Tk, d]
            v = v.repeat_interleave(r, dim=1)
            scores = q @ k.transpose(-1, -2)
        else:
            q = split_heads(self.query(x), h) * self.scale
            k = split_heads(self.key(y), h)
            v = split_heads(self.value(y), h)
            scores = q @ k.transpose(-1, -2)
        if self.kind == "talking_heads":
            scores = torch.einsum("hg,bgqk->bhqk", self.logit_mixing, scores)
        if key_padding is not None:
            scores = scores.masked_fill(key_padding.view(b, 1, 1, tk), float("-inf"))
        if causal:
            future = torch.ones(tq, tk, dtype=torch.bool).triu(1 + tk - tq)
            scores = scores.masked_fill(future, float("-inf"))
        probs = scores.softmax(-1)
        if self.kind == "talking_heads":
            probs = torch.einsum("hg,bgqk->bhqk", self.weight_mixing, probs)
        probs = F.dropout(probs, self.dropout, self.training)
        heads = probs @ v                                                  # [B, H, Tq, dv]
        return self.out(heads.permute(0, 2, 1, 3).reshape(b, tq, self.dv_total))


class FeedForward(nn.Module):
    def __init__(self, d, hidden, activation="relu", dropout=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.act = F.gelu if activation == "gelu" else F.relu
        self.dropout = dropout

    def forward(self, x):
        return self.fc2(F.dropout(self.act(self.fc1(x)), self.dropout, self.training))


def sinusoidal_positions(length, dim, first=0):
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    angles = torch.arange(first, first + length, dtype=torch.float64).unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat([angles.sin(), angles.cos()], dim=1).float()


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.pre_norm, self.p = c["pre_norm"], c["dropout"]
        self.self_attn = Attention(d_model=c["d_model"], **c["encoder_attention"])
        self.self_attn_norm = nn.LayerNorm(c["d_model"])
        self.ffn = FeedForward(c["d_model"], c["ffn_dim"], c.get("activation", "relu"))
        self.ffn_norm = nn.LayerNorm(c["d_model"])

    def block(self, x, norm, branch):
        h = norm(x) if self.pre_norm else x
        y = x + F.dropout(branch(h), self.p, self.training)
        return y if self.pre_norm else norm(y)

    def forward(self, x, pad):
        x = self.block(x, self.self_attn_norm, lambda h: self.self_attn(h, h, key_padding=pad))
        return self.block(x, self.ffn_norm, self.ffn)


class DecoderLayer(EncoderLayer):
    def __init__(self, c):
        super().__init__(dict(c, encoder_attention=c["decoder_attention"]))
        self.cross_attn = Attention(d_model=c["d_model"], **c["cross_attention"])
        self.cross_attn_norm = nn.LayerNorm(c["d_model"])

    def forward(self, x, memory, pad):
        x = self.block(x, self.self_attn_norm, lambda h: self.self_attn(h, h, causal=True))
        x = self.block(x, self.cross_attn_norm, lambda h: self.cross_attn(h, memory, key_padding=pad))
        return self.block(x, self.ffn_norm, self.ffn)


class Transformer(nn.Module):
    """Shared source/target/output embedding, sinusoidal positions, like cmha's defaults."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.src_embed = nn.Embedding(c["vocab"], c["d_model"])
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList([EncoderLayer(c) for _ in range(c["encoder_layers"])])
        self.decoder = nn.Module()
        self.decoder.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c["decoder_layers"])])
        if c.get("final_norm"):
            self.encoder.norm = nn.LayerNorm(c["d_model"])
            self.decoder.norm = nn.LayerNorm(c["d_model"])

    def embed(self, ids):
        d = self.c["d_model"]
        x = self.src_embed(ids) * math.sqrt(d) + sinusoidal_positions(ids.shape[1], d)
        return F.dropout(x, self.c["dropout"], self.training)

    def forward(self, src, src_pad, tgt):
        x = self.embed(src)
        for layer in self.encoder.layers:
            x = layer(x, src_pad)
        if hasattr(self.encoder, "norm"):
            x = self.encoder.norm(x)
        y = self.embed(tgt)
        for layer in self.decoder.layers:
            y = layer(y, x, src_pad)
        if hasattr(self.decoder, "norm"):
            y = self.decoder.norm(y)
        return y @ self.src_embed.weight.t()


class VitBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = nn.LayerNorm(c["d_model"], eps=1e-6)
        self.attn = Attention(d_model=c["d_model"], **c["attention"])
        self.norm2 = nn.LayerNorm(c["d_model"], eps=1e-6)
        self.mlp = FeedForward(c["d_model"], c["ffn_dim"], "gelu")

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h)
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, p, ch = c["d_model"], c["patch_size"], c["channels"]
        n = (c["image_size"] // p) ** 2
        self.patch_embed = nn.Linear(ch * p * p, d)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        extra = 1
        if c.get("distillation_token"):
            self.dist_token = nn.Parameter(torch.zeros(1, 1, d))
            extra = 2
        self.pos_embed = nn.Parameter(torch.zeros(1, n + extra, d))
        self.blocks = nn.ModuleList([VitBlock(c) for _ in range(c["depth"])])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, c["num_classes"])
        if c.get("distillation_token"):
            self.head_dist = nn.Linear(d, c["num_classes"])

    def forward(self, images):
        b, ch, hh, _ = images.shape
        p = self.c["patch_size"]
        g = hh // p
        patches = images.view(b, ch, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(b, g * g, ch * p * p)
        x = self.patch_embed(patches)
        parts = [self.cls_token.expand(b, 1, -1)]
        if hasattr(self, "dist_token"):
            parts.append(self.dist_token.expand(b, 1, -1))
        x = torch.cat(parts + [x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        logits = self.head(x[:, 0])
        if hasattr(self, "head_dist"):
            logits = (logits + self.head_dist(x[:, 1])) / 2
        return logits
