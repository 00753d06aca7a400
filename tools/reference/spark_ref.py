#!/usr/bin/python3
"""Independent float64 numpy reference of the Spark-X2.5 forward pass.

Written from the model description (shared/spark-spec.md), not from the C++ engine, so that the golden tests
compare two implementations that can only agree by both being right. It favours being readable over being fast:
every position of a token list is computed at once with masks (no KV cache), and greedy decoding simply reruns
the whole sequence for each new token.

    model = Model.load("checkpoint/")
    logits = model.logits([1, 2, 3])          # float64 [3, vocab]
    ids, all_logits = model.greedy([1, 2, 3], 8)

CLI: spark_ref.py --model DIR --prompt-ids 1,2,3 -n 64 [--logits-out F.npy] [--json]
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_np import load_checkpoint  # noqa: E402
from erf_np import erf  # noqa: E402

F64 = np.float64


def rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) * weight, row by row; the weight is used as is (not 1 + w)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def linear(x, weight):
    """x W^T for a weight stored [out, in], as Hugging Face stores it; widened to float64 first."""
    return x @ weight.astype(F64).T


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def gelu_erf(x):
    """Exact GELU, 0.5 x (1 + erf(x / sqrt 2)) -- not the tanh approximation."""
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def round_bf16(x):
    """x rounded to bfloat16 (nearest, ties to even) by way of float32, as the engine's bf16 KV cache stores K/V."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(F64)


def round_fp8_e4m3(x):
    """x rounded to FP8 E4M3 (OCP e4m3fn: 3 mantissa bits, exponent bias 7, subnormals down to 2^-9, largest
    finite 448; nearest, ties to even; beyond 448 saturated to +-448) by way of float32, as the engine's fp8 KV
    cache stores K/V. From the format's definition: the spacing of representable values around |x| is
    2^(e - 3) for |x| in [2^e, 2^(e+1)), and 2^-9 below 2^-6 (subnormals)."""
    x = np.ascontiguousarray(x, dtype=np.float32).astype(F64)
    _, e = np.frexp(np.abs(x))  # |x| = f * 2^e with f in [0.5, 1): |x| lies in [2^(e-1), 2^e)
    spacing = np.ldexp(1.0, np.maximum(e - 1, -6) - 3)
    rounded = np.round(np.abs(x) / spacing) * spacing  # np.round: ties to even
    return np.copysign(np.minimum(rounded, 448.0), x)


def softmax(scores):
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(axis=-1, keepdims=True)


class LayerSpec:
    """What differs between a sliding and a full attention layer: its RoPE and whether it has a window."""

    def __init__(self, layer_type, config):
        if layer_type not in ("sliding_attention", "full_attention"):
            raise ValueError(f"unknown layer type {layer_type!r}")
        rope = config["rope_parameters"][layer_type]
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"unsupported rope_type {rope['rope_type']!r}")
        self.sliding = layer_type == "sliding_attention"
        self.theta = float(rope["rope_theta"])
        # The rotated prefix of each head; the remaining dims pass through unchanged.
        self.rotary_dims = int(round(config["head_dim"] * float(rope.get("partial_rotary_factor", 1.0))))
        if self.rotary_dims % 2 or not 0 < self.rotary_dims <= config["head_dim"]:
            raise ValueError(f"rotary dims {self.rotary_dims} must be even and within head_dim")


class Model:
    def __init__(self, config, tensors, kv_dtype="f32", act_dtype="f32"):
        """kv_dtype "bf16" or "fp8": K (after RoPE) and V are rounded to bfloat16 or FP8 E4M3 before attention
        reads them, as the engine's --kv-cache-dtype bf16 / fp8 stores them. act_dtype "bf16": the inputs of
        the projections (q_k_v, out, gate, up, down and the output head; not the tiny head gate g_proj) are
        rounded to bfloat16, as the engine's --bf16-activations does. Everything else stays float64."""
        if kv_dtype not in ("f32", "bf16", "fp8"):
            raise ValueError(f"kv_dtype {kv_dtype!r}: f32, bf16 or fp8")
        if act_dtype not in ("f32", "bf16"):
            raise ValueError(f"act_dtype {act_dtype!r}: f32 or bf16")
        self.kv_dtype = kv_dtype
        self.act = round_bf16 if act_dtype == "bf16" else (lambda x: x)
        self.config = c = config
        if c.get("model_type") not in ("spark2_5", "spark3"):
            raise ValueError(f"model_type {c.get('model_type')!r} is not spark2_5")
        if c.get("attention_bias") or c.get("mlp_bias"):
            raise ValueError("attention_bias / mlp_bias are not part of Spark-X2.5")
        if c.get("hidden_act") != "gelu":
            raise ValueError(f"hidden_act {c.get('hidden_act')!r}: only exact-erf gelu is Spark-X2.5's")
        if not c.get("headwise_attn_output_gate", False):
            raise ValueError("Spark-X2.5 has a head-wise attention output gate")
        self.gate_mode = c.get("gate_attn_act_mode", "sigmoid")
        if self.gate_mode not in ("sigmoid", "silu"):
            raise ValueError(f"gate_attn_act_mode {self.gate_mode!r}")
        self.hidden = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c["num_key_value_heads"]
        self.head_dim = c["head_dim"]  # explicit in the config; hidden / heads is wrong for some sizes
        self.vocab = c["vocab_size"]
        self.eps = float(c["rms_norm_eps"])
        self.window = c["sliding_window"]
        if self.heads % self.kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if len(c["layer_types"]) != c["num_hidden_layers"]:
            raise ValueError("layer_types must list every layer")
        self.layer_specs = [LayerSpec(t, c) for t in c["layer_types"]]

        self.tensors = tensors
        self.embedding = self._tensor("model.embedding.weight", [self.vocab, self.hidden])
        if c.get("tie_word_embeddings", False):
            self.head = self.embedding
        else:
            self.head = self._tensor("lm_head.weight", [self.vocab, self.hidden])
        self.final_norm = self._tensor("model.norm.weight", [self.hidden])
        q_dim, kv_dim = self.heads * self.head_dim, self.kv_heads * self.head_dim
        inter = c["intermediate_size"]
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            self.layers.append({
                "attn_norm": self._tensor(p + "input_layernorm.weight", [self.hidden]),
                "qkv": self._tensor(p + "self_attn.q_k_v_proj.weight", [q_dim + 2 * kv_dim, self.hidden]),
                "gate": self._tensor(p + "self_attn.g_proj.weight", [self.heads, self.hidden]),
                "out": self._tensor(p + "self_attn.out_proj.weight", [self.hidden, q_dim]),
                "ffn_norm": self._tensor(p + "post_attention_layernorm.weight", [self.hidden]),
                "ffn_gate": self._tensor(p + "mlp.gate_proj.weight", [inter, self.hidden]),
                "ffn_up": self._tensor(p + "mlp.up_proj.weight", [inter, self.hidden]),
                "ffn_down": self._tensor(p + "mlp.down_proj.weight", [self.hidden, inter]),
            })

    @classmethod
    def load(cls, folder, kv_dtype="f32", act_dtype="f32"):
        config, tensors = load_checkpoint(folder)
        return cls(config, tensors, kv_dtype, act_dtype)

    def _tensor(self, name, shape):
        if name not in self.tensors:
            raise ValueError(f"checkpoint lacks tensor {name}")
        t = self.tensors[name]
        if list(t.shape) != list(shape):
            raise ValueError(f"tensor {name} has shape {list(t.shape)}, expected {shape}")
        return t

    # --- pieces of one layer -------------------------------------------------------------------------------

    def _rope(self, x, spec):
        """NeoX half-split rotary embedding on the first rd dims of each head; x is [T, heads, head_dim]."""
        rd, half = spec.rotary_dims, spec.rotary_dims // 2
        inv_freq = spec.theta ** (-np.arange(0, rd, 2, dtype=F64) / rd)  # over rd, not head_dim
        angles = np.arange(x.shape[0], dtype=F64)[:, None] * inv_freq[None, :]  # [T, rd/2]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        a, b = x[..., :half], x[..., half:rd]
        out = x.copy()
        out[..., :half] = a * cos - b * sin
        out[..., half:rd] = b * cos + a * sin
        return out

    def _visible(self, T, spec):
        """mask[p, k]: may query p attend to key k? Causal; a sliding window of W counts the query itself."""
        p = np.arange(T)[:, None]
        k = np.arange(T)[None, :]
        mask = k <= p
        if spec.sliding:
            mask &= k >= p - (self.window - 1)
        return mask

    def _head_gate(self, z):
        return sigmoid(z) if self.gate_mode == "sigmoid" else z * sigmoid(z)

    def _attention(self, x, w, spec, record):
        T, H, D = x.shape[0], self.heads, self.head_dim
        q_dim, kv_dim = H * D, self.kv_heads * D
        h = rms_norm(x, w["attn_norm"], self.eps)
        record("attn_norm", h)
        qkv = linear(self.act(h), w["qkv"])
        record("qkv", qkv)
        gate = self._head_gate(linear(h, w["gate"]))  # [T, heads]: one scalar per head, from the same h
        record("attn_gate", gate)
        # Q | K | V along the output rows, head-major inside each block.
        q = self._rope(qkv[:, :q_dim].reshape(T, H, D), spec)
        k = self._rope(qkv[:, q_dim:q_dim + kv_dim].reshape(T, self.kv_heads, D), spec)
        v = qkv[:, q_dim + kv_dim:].reshape(T, self.kv_heads, D)
        record("qkv_rope", np.concatenate([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], axis=1))
        if self.kv_dtype == "bf16":
            k, v = round_bf16(k), round_bf16(v)
        elif self.kv_dtype == "fp8":
            k, v = round_fp8_e4m3(k), round_fp8_e4m3(v)
        attn_out = self.attend(q, k, v, gate, spec)
        record("attn_out", attn_out)
        proj = linear(self.act(attn_out), w["out"])
        record("attn_proj", proj)
        return proj

    def attend(self, q, k, v, gate, spec):
        """Gated causal attention of one layer: q [T, heads, head_dim], k and v [T, kv_heads, head_dim] (as the
        cache holds them), gate [T, heads]; returns [T, heads * head_dim]."""
        T, H, D = q.shape
        visible = self._visible(T, spec)
        group = H // self.kv_heads
        scale = 1.0 / math.sqrt(D)
        gated = np.empty((T, H, D), dtype=F64)
        for j in range(H):
            kv = j // group  # GQA: consecutive query heads share a KV head
            scores = (q[:, j, :] @ k[:, kv, :].T) * scale
            scores = np.where(visible, scores, -np.inf)
            gated[:, j, :] = (softmax(scores) @ v[:, kv, :]) * gate[:, j:j + 1]
        return gated.reshape(T, H * D)

    def _mlp(self, x, w, record):
        h = rms_norm(x, w["ffn_norm"], self.eps)
        record("ffn_norm", h)
        g = linear(self.act(h), w["ffn_gate"])
        u = linear(self.act(h), w["ffn_up"])
        act = gelu_erf(g) * u
        out = linear(self.act(act), w["ffn_down"])
        for name, value in (("ffn_gate", g), ("ffn_up", u), ("ffn_act", act), ("ffn_out", out)):
            record(name, value)
        return out

    # --- whole model ---------------------------------------------------------------------------------------

    def logits(self, tokens, activations=None):
        """Logits float64 [T, vocab] for every position of `tokens`.

        With a dict as `activations`, also fills it with every intermediate, keyed as the C++ engine names its
        --dump-activations files: "embed", "{op}.L{layer}", "final_norm", "logits".
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError("need a non-empty list of token ids")
        if tokens.min() < 0 or tokens.max() >= self.vocab:
            raise ValueError(f"token ids must lie in [0, {self.vocab})")

        def recorder(layer):
            def record(name, value):
                if activations is not None:
                    activations[name if layer is None else f"{name}.L{layer}"] = value
            return record

        x = self.embedding[tokens].astype(F64)  # no embedding scaling
        recorder(None)("embed", x)
        for i, (w, spec) in enumerate(zip(self.layers, self.layer_specs)):
            record = recorder(i)
            x = x + self._attention(x, w, spec, record)
            record("resid_attn", x)
            x = x + self._mlp(x, w, record)
            record("resid", x)
        h = rms_norm(x, self.final_norm, self.eps)
        recorder(None)("final_norm", h)
        out = linear(self.act(h), self.head)
        recorder(None)("logits", out)
        return out

    def greedy(self, prompt, n):
        """Greedy decode n tokens: (generated ids, logits [len(prompt) + n - 1, vocab]).

        Row i of the logits is the prediction after the token at position i of prompt + generated[:-1]. Ties go
        to the lowest id (np.argmax returns the first maximum).
        """
        sequence = [int(t) for t in prompt]
        generated = []
        logits = self.logits(sequence)  # n == 0: just the prompt's
        for _ in range(n):
            token = int(np.argmax(logits[-1]))
            generated.append(token)
            sequence.append(token)
            if len(generated) < n:
                logits = self.logits(sequence)
        return generated, logits


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 numpy reference of the Spark-X2.5 forward pass")
    ap.add_argument("--model", required=True, help="checkpoint folder (config.json + safetensors)")
    ap.add_argument("--prompt-ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("-n", "--max-tokens", type=int, default=16, help="tokens to generate greedily")
    ap.add_argument("--top", type=int, default=5, help="top logits to print per step")
    ap.add_argument("--logits-out", help="write float32 [P + n - 1, vocab] logits here (.npy)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--kv-cache-dtype", choices=("f32", "bf16", "fp8"), default="f32",
                    help="bf16 / fp8: round K (after RoPE) and V to bfloat16 / FP8 E4M3, as the engine's KV cache "
                         "of that type does")
    ap.add_argument("--bf16-activations", action="store_true",
                    help="round the projections' inputs to bfloat16, as the engine's --bf16-activations does")
    args = ap.parse_args(argv)

    try:
        prompt = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        model = Model.load(args.model, args.kv_cache_dtype, "bf16" if args.bf16_activations else "f32")
        generated, logits = model.greedy(prompt, args.max_tokens)
    except (ValueError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    if args.logits_out:
        np.save(args.logits_out, logits.astype(np.float32))
    steps = []
    for k, token in enumerate(generated):
        row = logits[len(prompt) - 1 + k]
        top = np.argsort(-row, kind="stable")[:args.top]
        steps.append({"token": token, "top": [[int(i), float(row[i])] for i in top]})
    if args.json:
        print(json.dumps({"prompt_ids": prompt, "generated_ids": generated, "steps": steps}))
    else:
        for k, step in enumerate(steps):
            top = "  ".join(f"{i}:{v:.4f}" for i, v in step["top"])
            print(f"step {k}: token {step['token']}  top {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
