"""A training run's journaled state as two slot files written in place, in safetensors format.

The journal writes a run's adapter and AdamW state after every optim_step, before the step's
result resolves, so this write is on every training step's critical path. Measured on a GPU
machine for a 10 MB state (the tiny model's rank-32 adapter and its moments): one copy to the
host per tensor ~3 ms, building the file's bytes ~14 ms, writing them to a new file and renaming
it over the old one ~13 ms, against ~1 ms for the same write over an existing file's pages. So:

* the tensors of each device are packed on the device and copied once, into a pinned host
  buffer this writer keeps (`torch.cat` + one copy; CPU tensors are copied in directly);
* the file is the safetensors layout written straight from that buffer (header, then the
  buffer), so no second copy of the state is built;
* generation N goes to slot file N % 2, overwritten in place. A kill in the middle of a write
  can tear only the slot being written: the other slot still holds generation N - 1, whose
  optim_step's result was the last one a client saw. A slot is valid only if its last tensor,
  written last, holds the random commit token its header names, so a torn write (header new,
  tail old) is never read as whole.

Files stay plain safetensors (`safetensors.torch.load_file` reads them); nothing is fsynced,
as elsewhere in the journal: the page cache outlives a killed process, not a power cut.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open

COMMIT = "journal/commit"  # uint8[8] tensor, last in the file
SLOTS = ("state.0.safetensors", "state.1.safetensors")

_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}  # fmt: skip


def slot_path(run_dir: Path, gen: int) -> Path:
    return run_dir / SLOTS[gen % 2]


class SlotWriter:
    """Writes state files from one reusable host buffer (calls are serialised by a lock)."""

    def __init__(self) -> None:
        self._buf: torch.Tensor | None = None  # uint8, pinned when a CUDA device was copied from
        self._lock = threading.Lock()

    def _buffer(self, size: int, pinned: bool) -> torch.Tensor:
        buf = self._buf
        if buf is None or buf.numel() < size or (pinned and not buf.is_pinned()):
            # Room to grow: a run's state size changes only when its optimizer state appears.
            buf = torch.empty(max(size, 1 << 20) + size // 4, dtype=torch.uint8, pin_memory=pinned)
            self._buf = buf
        return buf

    def write(self, path: Path, tensors: Mapping[str, torch.Tensor], metadata: dict[str, str]) -> int:
        """Write `tensors` (on any devices) and `metadata` to `path` in place. Returns bytes."""
        commit = secrets.token_bytes(8)
        # Device tensors first, grouped by device, so each device's part of the buffer is one
        # contiguous copy; then CPU tensors; the commit token last.
        order = sorted(tensors, key=lambda n: (tensors[n].device.type == "cpu", str(tensors[n].device)))
        header: dict[str, object] = {}
        offset = 0
        spans: dict[str, tuple[int, int]] = {}
        for name in order:
            t = tensors[name]
            if t.dtype not in _DTYPES:
                raise TypeError(f"{name}: dtype {t.dtype} cannot be journaled")
            n = t.numel() * t.element_size()
            spans[name] = (offset, offset + n)
            header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
            offset += n
        header[COMMIT] = {"dtype": "U8", "shape": [8], "data_offsets": [offset, offset + 8]}
        total = offset + 8
        header["__metadata__"] = {**metadata, "commit": commit.hex()}
        head = json.dumps(header, separators=(",", ":")).encode()
        head += b" " * (-len(head) % 8)  # safetensors pads its header to 8 bytes with spaces
        devices: dict[torch.device, list[str]] = {}
        for name in order:
            if tensors[name].device.type != "cpu":
                devices.setdefault(tensors[name].device, []).append(name)
        with self._lock:
            buf = self._buffer(total, pinned=any(d.type == "cuda" for d in devices))
            for names in devices.values():
                packed = torch.cat([_bytes_of(tensors[n]) for n in names])
                start = spans[names[0]][0]
                buf[start : start + packed.numel()].copy_(packed)  # waits for the device once
            for name in order:
                t = tensors[name]
                if t.device.type == "cpu":
                    a, b = spans[name]
                    buf[a:b].copy_(_bytes_of(t))
            buf[offset:total].copy_(torch.frombuffer(bytearray(commit), dtype=torch.uint8))
            view = memoryview(buf.numpy())[:total]
            # In place ("r+b"): overwriting a file's pages costs a tenth of filling a new file.
            with open(path, "r+b" if path.exists() else "wb") as f:
                f.write(len(head).to_bytes(8, "little"))
                f.write(head)
                f.write(view)  # the commit token is the last bytes written
                f.truncate()
        return 8 + len(head) + total


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """`t`'s data as a flat uint8 tensor (same device)."""
    flat = t.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    return flat.view(torch.uint8) if flat.numel() else flat.new_zeros(0, dtype=torch.uint8)


def read_slot(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]] | None:
    """The tensors (without the commit token) and metadata of a whole slot file; None if the
    file is missing, unreadable or torn (its commit token does not match its header)."""
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), "pt") as f:
            metadata = dict(f.metadata() or {})
            token = f.get_tensor(COMMIT)
            if token.numpy().tobytes().hex() != metadata.get("commit"):
                return None
            tensors = {k: f.get_tensor(k) for k in f.keys() if k != COMMIT}  # noqa: SIM118
    except Exception:  # a torn file can fail to parse in many ways; all mean "not whole"
        return None
    return tensors, metadata
