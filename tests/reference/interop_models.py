"""Minimal PyTorch models with the parameter names and forward passes of timm,
Hugging Face transformers and fairseq, none of which Debian packages: the
sources the interop fixtures (fixtures_interop.py) are made from.

Each class copies what its original computes at inference for the layers cmha
maps (timm/models/vision_transformer.py and deit.py; transformers'
models/vit and models/deit; fairseq/models/transformer and
fairseq/modules/{multihead_attention,transformer_layer,*positional_embedding}.py)
and registers its parameters under the same names, so that state_dict()
gives the keys a real checkpoint has.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- timm ----
class TimmAttention(nn.Module):
    def __init__(self, dim, num_heads, attn_dim=None):
        super().__init__()
        attn_dim = attn_dim or dim
        self.num_heads, self.head_dim = num_heads, attn_dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, attn_dim * 3, bias=True)
        self.proj = nn.Linear(attn_dim, dim)

    def forward(self, x):
        B, N, _ = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, -1))


class TimmMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimmBlock(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio, attn_dim=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = TimmAttention(dim, num_heads, attn_dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = TimmMlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TimmPatchEmbed(nn.Module):
    def __init__(self, patch_size, in_chans, dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # [B, N, D]


class TimmVisionTransformer(nn.Module):
    """VisionTransformer, or with distilled=True VisionTransformerDistilled (DeiT)."""

    def __init__(self, img_size, patch_size, in_chans, num_classes, embed_dim, depth, num_heads, mlp_ratio,
                 distilled=False, attn_dim=None):
        super().__init__()
        n = (img_size // patch_size) ** 2
        self.distilled = distilled
        self.patch_embed = TimmPatchEmbed(patch_size, in_chans, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        if distilled:
            self.dist_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + (2 if distilled else 1), embed_dim))
        self.blocks = nn.Sequential(*[TimmBlock(embed_dim, num_heads, mlp_ratio, attn_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        if distilled:
            self.head_dist = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        prefix = [self.cls_token.expand(x.shape[0], -1, -1)]
        if self.distilled:
            prefix.append(self.dist_token.expand(x.shape[0], -1, -1))
        x = torch.cat(prefix + [x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        if self.distilled:  # inference: the mean of both heads
            return (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2
        return self.head(x[:, 0])


# ------------------------------------------------- Hugging Face ViT, DeiT ----
class HfSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_size = heads, dim // heads
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        B = x.shape[0]
        split = lambda t: t.view(B, -1, self.heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = (torch.matmul(q, k.transpose(-1, -2)) * self.head_size ** -0.5).softmax(dim=-1)
        return torch.matmul(probs, v).transpose(1, 2).reshape(B, -1, self.heads * self.head_size)


class HfDense(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.dense = nn.Linear(d_in, d_out)


class HfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attention, self.output = HfSelfAttention(dim, heads), HfDense(dim, dim)

    def forward(self, x):
        return self.output.dense(self.attention(x))


class HfLayer(nn.Module):
    def __init__(self, dim, heads, ffn, eps):
        super().__init__()
        self.attention = HfAttention(dim, heads)
        self.intermediate, self.output = HfDense(dim, ffn), HfDense(ffn, dim)
        self.layernorm_before = nn.LayerNorm(dim, eps=eps)
        self.layernorm_after = nn.LayerNorm(dim, eps=eps)

    def forward(self, x):
        x = self.attention(self.layernorm_before(x)) + x
        return self.output.dense(F.gelu(self.intermediate.dense(self.layernorm_after(x)))) + x


class HfPatchEmbeddings(nn.Module):
    def __init__(self, patch_size, channels, dim):
        super().__init__()
        self.projection = nn.Conv2d(channels, dim, kernel_size=patch_size, stride=patch_size)


class HfEmbeddings(nn.Module):
    def __init__(self, image_size, patch_size, channels, dim, distillation):
        super().__init__()
        n = (image_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        if distillation:
            self.distillation_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.position_embeddings = nn.Parameter(torch.zeros(1, n + (2 if distillation else 1), dim))
        self.patch_embeddings = HfPatchEmbeddings(patch_size, channels, dim)

    def forward(self, pixels):
        x = self.patch_embeddings.projection(pixels).flatten(2).transpose(1, 2)
        prefix = [self.cls_token.expand(x.shape[0], -1, -1)]
        if hasattr(self, "distillation_token"):
            prefix.append(self.distillation_token.expand(x.shape[0], -1, -1))
        return torch.cat(prefix + [x], dim=1) + self.position_embeddings


class HfEncoder(nn.Module):
    def __init__(self, depth, *args):
        super().__init__()
        self.layer = nn.ModuleList([HfLayer(*args) for _ in range(depth)])


class HfVitModel(nn.Module):
    """ViTModel / DeiTModel without the pooler (as the classification models build it)."""

    def __init__(self, c, distillation):
        super().__init__()
        self.embeddings = HfEmbeddings(c["image_size"], c["patch_size"], c["num_channels"], c["hidden_size"], distillation)
        self.encoder = HfEncoder(c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"],
                                 c["intermediate_size"], c["layer_norm_eps"])
        self.layernorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, pixels):
        x = self.embeddings(pixels)
        for layer in self.encoder.layer:
            x = layer(x)
        return self.layernorm(x)


class HfViTForImageClassification(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.vit = HfVitModel(c, distillation=False)
        self.classifier = nn.Linear(c["hidden_size"], c["num_labels"])

    def forward(self, pixels):
        return self.classifier(self.vit(pixels)[:, 0, :])


class HfDeiTForImageClassificationWithTeacher(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.deit = HfVitModel(c, distillation=True)
        self.cls_classifier = nn.Linear(c["hidden_size"], c["num_labels"])
        self.distillation_classifier = nn.Linear(c["hidden_size"], c["num_labels"])

    def forward(self, pixels):
        x = self.deit(pixels)
        return (self.cls_classifier(x[:, 0, :]) + self.distillation_classifier(x[:, 1, :])) / 2


# ------------------------------------------------------------- fairseq ----
PAD = 1  # fairseq's Dictionary: <s> 0, <pad> 1, </s> 2, <unk> 3


def make_positions(tokens, padding_idx):
    """fairseq.utils.make_positions: padding_idx + 1, + 2, ... over the non-padding tokens."""
    mask = tokens.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


class FairseqSinusoidalPositionalEmbedding(nn.Module):
    """No parameters (its table is a non-persistent buffer in current fairseq)."""

    def __init__(self, dim, padding_idx):
        super().__init__()
        self.dim, self.padding_idx = dim, padding_idx

    @staticmethod
    def get_embedding(num_embeddings, dim, padding_idx):  # float32, as fairseq
        half = dim // 2
        emb = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
        emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
        emb[padding_idx, :] = 0
        return emb

    def forward(self, tokens):
        B, T = tokens.shape
        weights = self.get_embedding(self.padding_idx + 1 + T, self.dim, self.padding_idx)
        return weights.index_select(0, make_positions(tokens, self.padding_idx).view(-1)).view(B, T, -1)


class FairseqLearnedPositionalEmbedding(nn.Embedding):
    def __init__(self, max_positions, dim, padding_idx):
        super().__init__(max_positions + padding_idx + 1, dim, padding_idx)

    def forward(self, tokens):
        return super().forward(make_positions(tokens, self.padding_idx))


class FairseqMultiheadAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.q_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, query, key, key_padding_mask=None, causal=False):
        B, Tq, _ = query.shape
        Tk = key.shape[1]
        split = lambda t, n: t.view(B, n, self.heads, self.head_dim).transpose(1, 2)
        q = split(self.q_proj(query) * self.scaling, Tq)
        k, v = split(self.k_proj(key), Tk), split(self.v_proj(key), Tk)
        scores = q @ k.transpose(-1, -2)                                      # [B, H, Tq, Tk]
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.view(B, 1, 1, Tk), float("-inf"))
        if causal:
            scores = scores.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float("-inf"))
        out = scores.softmax(-1) @ v
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, -1))


class FairseqLayer(nn.Module):
    """TransformerEncoderLayer, or with cross=True TransformerDecoderLayer."""

    def __init__(self, c, cross):
        super().__init__()
        d = c["embed_dim"]
        self.pre, self.act = c["normalize_before"], F.gelu if c["activation_fn"] == "gelu" else F.relu
        self.self_attn = FairseqMultiheadAttention(d, c["heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        if cross:
            self.encoder_attn = FairseqMultiheadAttention(d, c["heads"])
            self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, c["ffn_embed_dim"]), nn.Linear(c["ffn_embed_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def block(self, x, norm, branch):
        residual = x
        x = branch(norm(x) if self.pre else x) + residual
        return x if self.pre else norm(x)

    def forward(self, x, pad, memory=None, memory_pad=None):
        if memory is None:
            x = self.block(x, self.self_attn_layer_norm, lambda h: self.self_attn(h, h, key_padding_mask=pad))
        else:
            x = self.block(x, self.self_attn_layer_norm, lambda h: self.self_attn(h, h, causal=True))
            x = self.block(x, self.encoder_attn_layer_norm,
                           lambda h: self.encoder_attn(h, memory, key_padding_mask=memory_pad))
        return self.block(x, self.final_layer_norm, lambda h: self.fc2(self.act(self.fc1(h))))


class FairseqStack(nn.Module):
    """TransformerEncoder, or with decoder=True TransformerDecoder."""

    def __init__(self, c, embed_tokens, decoder):
        super().__init__()
        d = c["embed_dim"]
        self.register_buffer("version", torch.Tensor([3]))
        self.embed_scale = 1.0 if c["no_scale_embedding"] else math.sqrt(d)
        self.embed_tokens = embed_tokens
        self.embed_positions = (FairseqLearnedPositionalEmbedding(c["max_positions"], d, PAD) if c["learned_pos"]
                                else FairseqSinusoidalPositionalEmbedding(d, PAD))
        self.layers = nn.ModuleList([FairseqLayer(c, decoder) for _ in range(c["layers"])])
        self.layer_norm = nn.LayerNorm(d) if c["normalize_before"] else None

    def embed(self, tokens):
        return self.embed_scale * self.embed_tokens(tokens) + self.embed_positions(tokens)


class FairseqTransformerModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        v, d = c["vocab"], c["embed_dim"]
        enc_embed = nn.Embedding(v, d, padding_idx=PAD)
        dec_embed = enc_embed if c["share_all_embeddings"] else nn.Embedding(v, d, padding_idx=PAD)
        self.encoder = FairseqStack(c, enc_embed, decoder=False)
        self.decoder = FairseqStack(c, dec_embed, decoder=True)
        self.decoder.output_projection = nn.Linear(d, v, bias=False)
        if c["share_all_embeddings"] or c.get("share_decoder_input_output_embed"):
            self.decoder.output_projection.weight = self.decoder.embed_tokens.weight

    def forward(self, src_tokens, prev_output_tokens):
        pad = src_tokens.eq(PAD)
        x = self.encoder.embed(src_tokens)
        x = x * (1 - pad.unsqueeze(-1).type_as(x))  # fairseq zeroes the padding's embeddings
        for layer in self.encoder.layers:
            x = layer(x, pad)
        if self.encoder.layer_norm is not None:
            x = self.encoder.layer_norm(x)
        y = self.decoder.embed(prev_output_tokens)
        for layer in self.decoder.layers:
            y = layer(y, None, memory=x, memory_pad=pad)
        if self.decoder.layer_norm is not None:
            y = self.decoder.layer_norm(y)
        return self.decoder.output_projection(y)  # [B, T, V]
