"""titan's training step in plain PyTorch eager: the benchmark reference and parity oracle.

Reads what titan reads and does what titan's trainer does (src/titan/train/trainer.cpp), the
way a PyTorch user writes it:
  - the config: titan's resolved TOML (`titan config ... > run.toml`), the same file titan
    trains with (model.flavor, training.*, optimizer.*, lr_scheduler.*);
  - the weights: a titan checkpoint folder (metadata.json + rank_<r>.bin, see
    src/titan/components/checkpoint/checkpoint_metadata.h), e.g. the seed checkpoint that
    `--checkpoint.create_seed_checkpoint` writes;
  - the data: titan's token cache (a flat file of int32 ids; token_cache.h), packed and
    indexed as src/titan/components/data/dataloader.h and batch_layout.h describe;
  - the step: cross-entropy mean over the global batch, gradient clipping by the global norm
    (off when training.max_norm is 0), torch.optim.AdamW, and the
    TorchTitan's warmup-stable-decay learning rate through LambdaLR, as TorchTitan steps it.
Data parallel when started with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT): DistributedDataParallel over Gloo. --compile trains the model under
torch.compile (the anchor a PyTorch user would pick instead of eager). --device cuda trains on
the GPU LOCAL_RANK selects, as TorchTitan does: FSDP2's fully_shard per block and at the root
over NCCL (any world size, one rank included), bfloat16 parameters with float32 gradient
reduction when training.mixed_precision_param is bfloat16.

Run with the Python of the environment scripts/setup.sh creates (the PyTorch titan builds on):
  ~/.cache/titan/venv-torch-2.15.0/bin/python bench/reference/train.py --config run.toml \
      --checkpoint CKPT/step-0 --tokens ~/.cache/titan/tokens/kjv_bible-<key>.tokens \
      --metrics out.jsonl
"""

import argparse
import json
import math
import os
import resource
import struct
import sys
import time
import tomllib

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import FLAVORS, Transformer, flops_per_token  # noqa: E402

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
          "F64": torch.float64}


def load_titan_checkpoint(folder: str, section: str = "model") -> dict:
    """Full tensors of one section ("model", "optimizer") of a titan checkpoint folder."""
    with open(os.path.join(folder, "metadata.json")) as f:
        meta = json.load(f)
    if meta.get("format") != "titan-checkpoint":
        raise ValueError(f"{folder}/metadata.json is not a titan checkpoint")
    out = {}
    for name, rec in meta["sections"][section].items():
        dtype = DTYPES[rec["dtype"]]
        full = torch.empty(rec["global_shape"], dtype=dtype)
        rows = full.view(full.shape[0], -1) if full.dim() > 0 else full.view(1, 1)
        for chunk in rec["chunks"]:
            with open(os.path.join(folder, chunk["file"]), "rb") as f:
                f.seek(chunk["offset"])
                data = bytearray(f.read(chunk["bytes"]))
            piece = torch.frombuffer(data, dtype=dtype).view(chunk["rows"], -1)
            rows[chunk["row_offset"]:chunk["row_offset"] + chunk["rows"]] = piece
        out[name] = full.float()
    return out


def write_safetensors(path: str, tensors: dict) -> None:
    """tensors (name -> float32 CPU tensor) in the safetensors format that titan reads."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        blob = tensors[name].detach().float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


class TokenBatches:
    """titan's packed samples, TorchTitan's disjoint windows: sample i = tokens[i*(S+1) :
    (i+1)*(S+1)]; step t (0-based) of data-parallel rank r takes ordinals t*G + r*b + row,
    wrapped modulo the sample count."""

    def __init__(self, path: str, seq_len: int, local_batch: int, dp_rank: int, dp_degree: int):
        n_tokens = os.path.getsize(path) // 4
        self.tokens = torch.from_file(path, shared=False, size=n_tokens, dtype=torch.int32)
        self.seq_len, self.local_batch = seq_len, local_batch
        self.dp_rank, self.global_batch = dp_rank, local_batch * dp_degree
        self.num_samples = n_tokens // (seq_len + 1)

    def get(self, step: int):
        """-> input, label: [b, S] int64 each, label = the next token."""
        rows = []
        for row in range(self.local_batch):
            sample = (step * self.global_batch + self.dp_rank * self.local_batch + row) \
                % self.num_samples
            rows.append(self.tokens[sample * (self.seq_len + 1):(sample + 1) * (self.seq_len + 1)])
        x = torch.stack(rows).long()  # [b, S + 1]
        return x[:, :-1], x[:, 1:]


def lr_lambda(cfg: dict):
    """TorchTitan's warmup-stable-decay multiplier of the 0-based scheduler step, for LambdaLR:
    warmup reaches 1 at step warmup_steps, and the decay ends at a virtual step after the run
    (TorchTitan 0.2.2, torchtitan/components/optimizer/lr_scheduler.py)."""
    sched, steps = cfg["lr_scheduler"], cfg["training"]["steps"]
    warmup = min(sched["warmup_steps"], steps)
    decay = steps - warmup
    if "decay_ratio" in sched:
        decay = min(round(steps * sched["decay_ratio"]), steps - warmup)
    stable = steps + 1 - warmup - decay
    m = sched["min_lr_factor"]

    def factor(s: int) -> float:
        if s < warmup:
            return (s + 1) / warmup
        if s < warmup + stable:
            return 1.0
        progress = (s + 1 - warmup - stable) / decay
        f = {"linear": 1.0 - progress, "sqrt": 1.0 - math.sqrt(progress),
             "cosine": 0.5 * (1.0 + math.cos(math.pi * progress))}[sched["decay_type"]]
        return m + (1.0 - m) * f

    return factor


def clip_grad_norm(params, max_norm: float) -> float:
    """Scales the gradients by max_norm / (norm + 1e-6) when their global 2-norm exceeds
    max_norm > 0 (TorchTitan's clipping); returns the norm. The norm accumulates in float64,
    as titan's does: a float32 norm (torch 1.13's clip_grad_norm_) was off by 1.4e-4 relative
    on the debug model's output gradient, 100x more than the parity test allows. Under FSDP2
    each rank holds a shard of every gradient (a DTensor): the squares add over the ranks."""
    sharded = any(hasattr(q.grad, "to_local") for q in params)
    local = [q.grad.to_local() if hasattr(q.grad, "to_local") else q.grad for q in params]
    sq = torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64) ** 2 for g in local]).sum()
    if sharded and dist.is_initialized():
        dist.all_reduce(sq)
    norm = math.sqrt(sq.item())
    if max_norm > 0 and norm > max_norm:
        for g in local:
            g.mul_(max_norm / (norm + 1e-6))
    return norm


def check_supported(cfg: dict, device: str) -> None:
    """Refuses config values this reference does not implement."""
    t, o = cfg["training"], cfg["optimizer"]
    unsupported = []
    if cfg["model"]["name"] != "llama3" or cfg["model"]["flavor"] not in FLAVORS:
        unsupported.append(f"model {cfg['model']['name']} {cfg['model']['flavor']} "
                           f"(llama3 {', '.join(FLAVORS)} only)")
    if t.get("global_batch_size", -1) != -1:
        unsupported.append("training.global_batch_size (no gradient accumulation)")
    if t.get("mixed_precision_param", "float32") not in ("float32", "bfloat16") or \
            (device == "cpu" and t.get("mixed_precision_param", "float32") != "float32"):
        unsupported.append("training.mixed_precision_param (float32; bfloat16 on cuda)")
    if o["name"] != "AdamW":
        unsupported.append(f"optimizer.name {o['name']} (AdamW only)")
    if cfg.get("activation_checkpoint", {}).get("mode", "none") != "none":
        unsupported.append("activation_checkpoint.mode (none only)")
    if unsupported:
        raise SystemExit("reference: unsupported config: " + "; ".join(unsupported))


def fully_shard_model(model: Transformer, cfg: dict) -> None:
    """TorchTitan's FSDP2 wrapping: each block, then the root; bfloat16 compute parameters
    with float32 gradient reduction when training.mixed_precision_param asks for them."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    bf16 = cfg["training"].get("mixed_precision_param", "float32") == "bfloat16"
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else torch.float32,
                              reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="titan's resolved config (TOML)")
    p.add_argument("--checkpoint", required=True, help="titan checkpoint folder (step-<N>)")
    p.add_argument("--tokens", required=True, help="titan token cache (.tokens file)")
    p.add_argument("--metrics", help="write one JSON line per step here (rank 0)")
    p.add_argument("--save_grads", help="safetensors file for step 1's gradients, unclipped")
    p.add_argument("--save_weights", help="safetensors file for the weights after training")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0")),
                   help="intra-op threads (default: OMP_NUM_THREADS, else cores / ranks)")
    p.add_argument("--compile", action="store_true", help="train under torch.compile")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the GPU LOCAL_RANK selects, FSDP2 over NCCL")
    args = p.parse_args()

    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    check_supported(cfg, args.device)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29512")
        dist.init_process_group("nccl", rank=rank, world_size=world)
    elif world > 1:
        dist.init_process_group("gloo")

    t, o = cfg["training"], cfg["optimizer"]
    model = Transformer(FLAVORS[cfg["model"]["flavor"]])
    model.load_state_dict(load_titan_checkpoint(args.checkpoint), strict=True)
    model.to(device)
    if device.type == "cuda":
        fully_shard_model(model, cfg)
        train_model = model
    else:
        train_model = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    if args.compile:
        train_model = torch.compile(train_model)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]),
                                  eps=o["eps"], weight_decay=o["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    data = TokenBatches(args.tokens, t["seq_len"], t["local_batch_size"], rank, world)
    max_norm = t["max_norm"]
    local_tokens = t["local_batch_size"] * t["seq_len"]
    fpt = flops_per_token(model, t["seq_len"])
    metrics = open(args.metrics, "w") if args.metrics and rank == 0 else None
    if rank == 0:
        print(f"reference: llama3 {cfg['model']['flavor']}, {sum(x.numel() for x in params):,} "
              f"parameters, {fpt:,} FLOPs per token; {world} rank(s) x "
              f"{torch.get_num_threads()} thread(s); torch {torch.__version__}"
              f"{' (torch.compile)' if args.compile else ''}", flush=True)

    for step in range(1, t["steps"] + 1):
        start = time.perf_counter()
        inputs, labels = data.get(step - 1)  # [b, S] each
        inputs, labels = inputs.to(device), labels.to(device)
        data_time = time.perf_counter() - start
        optimizer.zero_grad(set_to_none=True)
        logits = train_model(inputs)  # [b, S, V]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())  # fp32 loss
        loss.backward()
        if step == 1 and args.save_grads and rank == 0:
            write_safetensors(args.save_grads, {n: q.grad for n, q in model.named_parameters()})
        grad_norm = clip_grad_norm(params, max_norm)
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        loss = loss.detach()
        if world > 1:
            dist.all_reduce(loss)
        loss = loss.item() / world
        step_time = time.perf_counter() - start
        if not math.isfinite(loss):
            raise SystemExit(f"reference: loss is {loss} at step {step}")
        rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        reserved_gib = torch.cuda.max_memory_reserved(device) / 2**30 \
            if device.type == "cuda" else 0.0
        if rank == 0:
            print(f"step: {step}  loss: {loss:.4f}  grad_norm: {grad_norm:.4f}  "
                  f"tps: {local_tokens / step_time:,.0f}  rss: {rss_gib:.2f}GiB", flush=True)
        if metrics:
            metrics.write(json.dumps({
                "step": step, "loss": loss, "grad_norm": grad_norm, "lr": lr,
                "tps": local_tokens / step_time, "step_time_s": step_time,
                "data_time_s": data_time, "rss_peak_gib": rss_gib,
                "cuda_max_reserved_gib": reserved_gib,
                "flops_per_token": fpt}) + "\n")
            metrics.flush()
    if args.save_weights and rank == 0:
        write_safetensors(args.save_weights, dict(model.named_parameters()))
    if metrics:
        metrics.close()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
