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
MASTER_PORT): DistributedDataParallel over Gloo (FSDP needs collectives Gloo lacks in 1.13).

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13):
  /usr/bin/python3 bench/reference/train.py --config run.toml --checkpoint CKPT/step-0 \
      --tokens ~/.cache/titan/tokens/kjv_bible-<key>.tokens --metrics out.jsonl
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
    """titan's packed samples: sample i = tokens[i*S : i*S + S + 1]; step t (0-based) of
    data-parallel rank r takes ordinals t*G + r*b + row, wrapped modulo the sample count."""

    def __init__(self, path: str, seq_len: int, local_batch: int, dp_rank: int, dp_degree: int):
        n_tokens = os.path.getsize(path) // 4
        self.tokens = torch.from_file(path, shared=False, size=n_tokens, dtype=torch.int32)
        self.seq_len, self.local_batch = seq_len, local_batch
        self.dp_rank, self.global_batch = dp_rank, local_batch * dp_degree
        self.num_samples = (n_tokens - 1) // seq_len

    def get(self, step: int):
        """-> input, label: [b, S] int64 each, label = the next token."""
        rows = []
        for row in range(self.local_batch):
            sample = (step * self.global_batch + self.dp_rank * self.local_batch + row) \
                % self.num_samples
            rows.append(self.tokens[sample * self.seq_len:(sample + 1) * self.seq_len + 1])
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
    max_norm > 0 (TorchTitan's clipping); returns the norm. The norm accumulates in float64:
    torch 1.13's clip_grad_norm_ (torch.norm in float32) is off by 1.4e-4 relative on the
    debug model's output gradient (measured), 100x more than the parity test allows."""
    norm = math.sqrt(sum(torch.linalg.vector_norm(q.grad, dtype=torch.float64).item() ** 2
                         for q in params))
    if max_norm > 0 and norm > max_norm:
        for q in params:
            q.grad.mul_(max_norm / (norm + 1e-6))
    return norm


def check_supported(cfg: dict) -> None:
    """Refuses config values this reference does not implement."""
    t, o = cfg["training"], cfg["optimizer"]
    unsupported = []
    if cfg["model"]["name"] != "llama3" or cfg["model"]["flavor"] not in FLAVORS:
        unsupported.append(f"model {cfg['model']['name']} {cfg['model']['flavor']} "
                           f"(llama3 {', '.join(FLAVORS)} only)")
    if t.get("global_batch_size", -1) != -1:
        unsupported.append("training.global_batch_size (no gradient accumulation)")
    if t.get("mixed_precision_param", "float32") != "float32":
        unsupported.append("training.mixed_precision_param (float32 only)")
    if o["name"] != "AdamW":
        unsupported.append(f"optimizer.name {o['name']} (AdamW only)")
    if cfg.get("activation_checkpoint", {}).get("mode", "none") != "none":
        unsupported.append("activation_checkpoint.mode (none only)")
    if unsupported:
        raise SystemExit("reference: unsupported config: " + "; ".join(unsupported))


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
    args = p.parse_args()

    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    check_supported(cfg)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    if world > 1:
        dist.init_process_group("gloo")

    t, o = cfg["training"], cfg["optimizer"]
    model = Transformer(FLAVORS[cfg["model"]["flavor"]])
    model.load_state_dict(load_titan_checkpoint(args.checkpoint), strict=True)
    train_model = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
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
              f"{torch.get_num_threads()} thread(s); torch {torch.__version__}", flush=True)

    for step in range(1, t["steps"] + 1):
        start = time.perf_counter()
        inputs, labels = data.get(step - 1)  # [b, S] each
        data_time = time.perf_counter() - start
        optimizer.zero_grad(set_to_none=True)
        logits = train_model(inputs)  # [b, S, V]
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
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
        if rank == 0:
            print(f"step: {step}  loss: {loss:.4f}  grad_norm: {grad_norm:.4f}  "
                  f"tps: {local_tokens / step_time:,.0f}  rss: {rss_gib:.2f}GiB", flush=True)
        if metrics:
            metrics.write(json.dumps({
                "step": step, "loss": loss, "grad_norm": grad_norm, "lr": lr,
                "tps": local_tokens / step_time, "step_time_s": step_time,
                "data_time_s": data_time, "rss_peak_gib": rss_gib,
                "flops_per_token": fpt}) + "\n")
            metrics.flush()
    if args.save_weights and rank == 0:
        write_safetensors(args.save_weights, dict(model.named_parameters()))
    if world > 1:
        # torch 1.13 can hang tearing DDP down at interpreter exit (seen here: the reducer's
        # destructor joins a Gloo thread that waits for the GIL the destructor holds, while the
        # store thread spins on a closed socket): meet the other ranks, then leave at once.
        dist.barrier()
        if metrics:
            metrics.close()
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
