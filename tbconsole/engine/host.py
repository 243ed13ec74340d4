"""Device tensors to host memory in one transfer.

Copying a training run's state to the host tensor by tensor (`t.cpu()` for each) makes the host
wait for the device once per tensor: for a rank-32 adapter and its AdamW moments that is a few
hundred waits per optim_step, most of the journal's cost on a GPU. `to_host` packs the tensors of
each device and dtype into one buffer on the device, copies that once (into pinned memory on
CUDA, which the copy engine reads directly) and hands back views of it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


def to_host(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached, contiguous CPU copies of `tensors`, same keys and order. Tensors already on the
    CPU are not copied (as `t.cpu()`): the result may share their memory. Device tensors come
    back as non-overlapping views of one host buffer per (device, dtype), which safetensors
    saves as separate tensors."""
    out: dict[str, torch.Tensor] = {}
    groups: dict[tuple[torch.device, torch.dtype], list[str]] = {}
    for name, t in tensors.items():
        if t.device.type == "cpu":
            out[name] = t.detach().contiguous()
        else:
            groups.setdefault((t.device, t.dtype), []).append(name)
    for (device, dtype), names in groups.items():
        flat = torch.cat([tensors[n].detach().reshape(-1) for n in names])
        host = torch.empty(flat.shape, dtype=dtype, pin_memory=device.type == "cuda")
        host.copy_(flat)  # synchronous: the views below are read as soon as we return
        offset = 0
        for n in names:
            t = tensors[n]
            out[n] = host[offset : offset + t.numel()].view(t.shape)
            offset += t.numel()
    return {name: out[name] for name in tensors}
