#!/usr/bin/env python3
"""Writes a small llama-architecture GGUF model with random weights.

The llama.cpp benchmark (run_llama_cpp.sh) needs a model that llama.cpp's own
tools load, run and quantize, without downloading one: this script builds it
with llama.cpp's gguf writer (gguf-py from the fetched llama.cpp tree, passed
with --gguf-py), F16 weights drawn from a seeded normal distribution and an
SPM ("llama") vocabulary of byte tokens plus synthetic pieces, so that any
prompt tokenizes. Greedy generation on it is deterministic, which is what the
benchmark's application check compares.

Usage: make_random_model.py --gguf-py DIR --out model-f16.gguf
       [--embd 1024 --layers 8 --heads 16 --kv-heads 4 --ff 2816 --vocab 8192 --seed 7]
"""
import argparse
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--embd", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=2816)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    if a.embd % a.heads or a.heads % a.kv_heads:
        ap.error("--embd must be a multiple of --heads, --heads of --kv-heads")
    if a.vocab < 3 + 256 + 1:
        ap.error("--vocab must hold the 3 control tokens and the 256 byte tokens")
    sys.path.insert(0, a.gguf_py)
    import numpy as np
    import gguf

    rng = np.random.default_rng(a.seed)
    w = gguf.GGUFWriter(a.out, "llama")
    head_dim = a.embd // a.heads
    w.add_name("kerncap-random-llama")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    # SPM vocabulary: <unk> <s> </s>, the 256 byte fallbacks, then pieces.
    tokens, scores, types = [], [], []
    for t in ("<unk>", "<s>", "</s>"):
        tokens.append(t)
        scores.append(0.0)
        types.append(gguf.TokenType.CONTROL if t != "<unk>" else gguf.TokenType.UNKNOWN)
    for b in range(256):
        tokens.append("<0x%02X>" % b)
        scores.append(0.0)
        types.append(gguf.TokenType.BYTE)
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen = set(tokens)
    i = 0
    while len(tokens) < a.vocab:
        # Deterministic pieces: "▁a", "▁b", ..., "▁aa", ... (SPM's word marker).
        n, s = i, ""
        while True:
            s = letters[n % 26] + s
            n = n // 26 - 1
            if n < 0:
                break
        i += 1
        for piece in ("\u2581" + s, s):
            if piece not in seen and len(tokens) < a.vocab:
                seen.add(piece)
                tokens.append(piece)
                scores.append(-float(len(tokens)))
                types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def tensor(name, shape, scale):
        # numpy shape is (rows, cols) = GGUF's (ne1, ne0).
        data = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float16)
        w.add_tensor(name, data)

    def ones(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32))

    kv = a.kv_heads * head_dim
    tensor("token_embd.weight", (a.vocab, a.embd), 0.02)
    for l in range(a.layers):
        p = "blk.%d." % l
        ones(p + "attn_norm.weight", a.embd)
        tensor(p + "attn_q.weight", (a.embd, a.embd), a.embd ** -0.5)
        tensor(p + "attn_k.weight", (kv, a.embd), a.embd ** -0.5)
        tensor(p + "attn_v.weight", (kv, a.embd), a.embd ** -0.5)
        tensor(p + "attn_output.weight", (a.embd, a.embd), a.embd ** -0.5)
        ones(p + "ffn_norm.weight", a.embd)
        tensor(p + "ffn_gate.weight", (a.ff, a.embd), a.embd ** -0.5)
        tensor(p + "ffn_up.weight", (a.ff, a.embd), a.embd ** -0.5)
        tensor(p + "ffn_down.weight", (a.embd, a.ff), a.ff ** -0.5)
    ones("output_norm.weight", a.embd)
    tensor("output.weight", (a.vocab, a.embd), a.embd ** -0.5)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%d layers, embd %d, vocab %d)" % (a.out, a.layers, a.embd, a.vocab))


if __name__ == "__main__":
    main()
