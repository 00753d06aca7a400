"""Reads a Hugging Face checkpoint folder (config.json + safetensors) into numpy, with no other dependency.

safetensors layout: an 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the raw little-endian
tensor bytes; offsets count from the first byte after the header. A sharded checkpoint lists its files in
model.safetensors.index.json ({"weight_map": {name: file}}).

Tensors are returned as float32: that holds BF16, F16 and F32 values exactly, and the reference widens to float64
where it computes.
"""
import json
import os
import struct

import numpy as np

_ITEM_SIZE = {"BF16": 2, "F16": 2, "F32": 4}


def _decode(raw, dtype, shape):
    if dtype == "BF16":
        # A bfloat16 is the top half of a float32: widen the bits and reinterpret.
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        values = bits.view(np.float32)
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    else:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    return values.reshape(shape)


def read_safetensors(path):
    """All tensors of one .safetensors file as {name: float32 array}."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = [int(d) for d in info["shape"]]
        count = int(np.prod(shape)) if shape else 1
        if info["dtype"] not in _ITEM_SIZE:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        if end - begin != count * _ITEM_SIZE[info["dtype"]] or end > len(data):
            raise ValueError(f"{path}: tensor {name} has inconsistent data_offsets {begin}..{end}")
        tensors[name] = _decode(bytes(data[begin:end]), info["dtype"], shape)
    return tensors


def load_checkpoint(folder):
    """(config dict, {tensor name: float32 array}) of a checkpoint folder, single-file or sharded."""
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map = None
        files = ["model.safetensors"]
    tensors = {}
    for name in files:
        shard = read_safetensors(os.path.join(folder, name))
        for tensor_name, value in shard.items():
            if tensor_name in tensors:
                raise ValueError(f"tensor {tensor_name} appears in more than one shard")
            if weight_map is not None and weight_map.get(tensor_name) != name:
                raise ValueError(f"{name}: tensor {tensor_name} is not mapped to this shard by the index")
            tensors[tensor_name] = value
    if weight_map is not None:
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise ValueError(f"tensors listed in the index but absent from the shards: {missing[:5]}")
    return config, tensors
