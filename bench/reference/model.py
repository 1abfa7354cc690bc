"""titan's llama3 model in plain PyTorch eager (Debian's python3-torch 1.13).

The benchmark reference and parity oracle for titan's src/titan/models/common (issue 7): the
same architecture, parameter names and numerics, written the way an eager PyTorch user would
(TorchTitan's llama3 model): RMSNorm, rotary positions in Hugging Face's rotate_half layout
(with Llama 3.1 frequency scaling when a flavor sets it), grouped-query attention with the
scores materialised, SwiGLU feed-forward; tok_embeddings -> layers.{i} -> norm -> output.
Weights come from a titan checkpoint (train.py), so there is no initialisation here.
"""

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class RopeScaling:
    """Llama 3.1 "llama3" RoPE scaling (rope.h RopeScaling)."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass
class ModelArgs:
    """TransformerArgs of src/titan/models/common/transformer_args.h."""

    dim: int = 256
    n_layers: int = 6
    n_heads: int = 16
    n_kv_heads: int = 0  # 0: n_heads
    vocab_size: int = 2048
    multiple_of: int = 256
    ffn_dim_multiplier: Optional[float] = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Optional[RopeScaling] = None

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        """TorchTitan's SwiGLU width: 2/3 of 4 x dim, times the multiplier, rounded up."""
        hidden = 2 * (4 * self.dim) // 3
        if self.ffn_dim_multiplier is not None:
            hidden = int(self.ffn_dim_multiplier * hidden)
        return self.multiple_of * ((hidden + self.multiple_of - 1) // self.multiple_of)


# The llama3 flavors of src/titan/models/llama3/flavors.cpp that the benchmark uses.
# Both with Llama 3.1's RoPE scaling at TorchTitan's factor 8 (as every TorchTitan llama3 flavor).
FLAVORS = {
    "debugmodel": ModelArgs(dim=256, n_layers=6, n_heads=16, vocab_size=2048,
                            rope_theta=500000.0, rope_scaling=RopeScaling()),
    "100M": ModelArgs(dim=768, n_layers=12, n_heads=12, n_kv_heads=4, vocab_size=2048,
                      rope_theta=500000.0, rope_scaling=RopeScaling()),
}


def rope_inv_freq(args: ModelArgs) -> torch.Tensor:
    """Frequencies theta^(-2i/Dh), scaled as Llama 3.1 does when set: [Dh/2] float64."""
    dh = args.head_dim
    inv_freq = args.rope_theta ** -(torch.arange(0, dh, 2, dtype=torch.float64) / dh)  # [Dh/2]
    s = args.rope_scaling
    if s is None:
        return inv_freq
    original = float(s.original_max_position_embeddings)
    wavelen = 2.0 * math.pi / inv_freq  # [Dh/2]
    smooth = (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    interpolated = (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq  # [Dh/2]
    return torch.where(wavelen > original / s.low_freq_factor, inv_freq / s.factor,
                       torch.where(wavelen < original / s.high_freq_factor, inv_freq,
                                   interpolated))


def rope_cos_sin(inv_freq: torch.Tensor, seq_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of pos x f_i, computed in float64, returned as float32 [S, Dh] each."""
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)  # [S, Dh/2]
    full = torch.cat([angles, angles], dim=-1)  # [S, Dh]
    return full.cos().float(), full.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, S, H, Dh] -> x * cos + rotate_half(x) * sin, same shape."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # [B, S, H, Dh]
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., dim] -> x / rms(x) * weight, same shape."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.kv_heads, args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * args.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.kv_heads * args.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.kv_heads * args.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * args.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x: [B, S, dim]; cos, sin: [S, Dh]."""
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim)  # [B, S, H, Dh]
        k = self.wk(x).view(b, s, self.n_kv_heads, self.head_dim)  # [B, S, Hkv, Dh]
        v = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim)  # [B, S, Hkv, Dh]
        q = apply_rope(q, cos, sin).transpose(1, 2)  # [B, H, S, Dh]
        k = apply_rope(k, cos, sin).transpose(1, 2)  # [B, Hkv, S, Dh]
        v = v.transpose(1, 2)  # [B, Hkv, S, Dh]
        # PyTorch's fused causal attention (its CPU flash kernel), grouped-query heads shared.
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=True)  # [B, H, S, Dh]
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))  # [B, S, dim]


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, S, dim] -> w2(silu(w1 x) * w3 x): [B, S, dim]."""
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, args.ffn_hidden)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x, cos, sin):
        """x: [B, S, dim] -> [B, S, dim] (pre-norm residual attention, then feed-forward)."""
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        self.inv_freq = rope_inv_freq(args)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: [B, S] int64 -> logits [B, S, vocab] float32. Positions 0..S-1."""
        s = tokens.shape[1]
        cos, sin = rope_cos_sin(self.inv_freq, s)  # [S, Dh] each
        h = self.tok_embeddings(tokens)  # [B, S, dim]
        for layer in self.layers:
            h = layer(h, cos, sin)  # [B, S, dim]
        return self.output(self.norm(h))  # [B, S, vocab]


def flops_per_token(model: Transformer, seq_len: int) -> int:
    """TorchTitan's count: 6 x non-embedding parameters + 12 x layers x heads x Dh x seq_len."""
    a = model.args
    params = sum(p.numel() for p in model.parameters())
    return 6 * (params - model.tok_embeddings.weight.numel()) + \
        12 * a.n_layers * a.n_heads * a.head_dim * seq_len
