"""Build the lab's tiny chat model offline: a Llama with random weights that the real vLLM (CPU backend) serves.

No model hub is reachable here, and the lab needs a model the real server loads in seconds and a few hundred MB.
This writes a Hugging Face model directory from the project's own files only:
- a byte-level BPE tokenizer (``tokenizers``, vocabulary VOCAB) trained on the project's licence text (COPYING),
- a chat template (tokenizer_config.json) in the ChatML shape, so /v1/chat/completions works,
- a LlamaForCausalLM config.json (hidden 64, 2 layers, 4 heads, 2 KV heads, head_dim 32: vLLM's CPU attention takes
  head sizes of 32 and more only - 16 passes /health, then the first request kills the server),
- random weights (seeded, normal(0, 0.02), norms 1) as one bfloat16 safetensors file, written with numpy.
Deterministic: the same inputs give the same bytes (tests/unit checks it). The model writes random tokens; it exists
to exercise the serving path (load, tokenise, stream, metrics, shutdown), not to answer.

    python tools/build_tiny_model.py [--out DIR] [--check]

The directory holds ``llmstack-build.json`` with the hash of the inputs; a build whose inputs did not change is
skipped (``make setup`` runs it every time).
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, ".cache", "models", "llmstack-tiny")
CORPUS = (os.path.join(ROOT, "COPYING"),)
SEED = 20261205
VOCAB = 2048
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
    "initializer_range": 0.02, "vocab_size": VOCAB, "torch_dtype": "bfloat16",
}
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def inputs_digest():
    """The hash of what the model is made of: this script, the corpus, the tokenizers and numpy versions (numpy's
    generator draws the weights)."""
    import tokenizers
    digest = hashlib.sha256()
    for path in (os.path.abspath(__file__),) + CORPUS:
        with open(path, "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    digest.update(tokenizers.__version__.encode())
    digest.update(numpy.__version__.encode())
    return digest.hexdigest()


def train_tokenizer():
    """A byte-level BPE tokenizer trained on CORPUS (one thread: the merges do not depend on scheduling)."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train(list(CORPUS), trainer)
    return tokenizer


def tensor_shapes(config):
    """{name: shape} of a LlamaForCausalLM's weights, in the order they are written."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    q = config["num_attention_heads"] * config["head_dim"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    shapes = {"model.embed_tokens.weight": (vocab, hidden)}
    for layer in range(config["num_hidden_layers"]):
        prefix = "model.layers.%d." % layer
        shapes.update({
            prefix + "input_layernorm.weight": (hidden,),
            prefix + "self_attn.q_proj.weight": (q, hidden),
            prefix + "self_attn.k_proj.weight": (kv, hidden),
            prefix + "self_attn.v_proj.weight": (kv, hidden),
            prefix + "self_attn.o_proj.weight": (hidden, q),
            prefix + "post_attention_layernorm.weight": (hidden,),
            prefix + "mlp.gate_proj.weight": (inter, hidden),
            prefix + "mlp.up_proj.weight": (inter, hidden),
            prefix + "mlp.down_proj.weight": (hidden, inter),
        })
    shapes["model.norm.weight"] = (hidden,)
    shapes["lm_head.weight"] = (vocab, hidden)
    return shapes


def bfloat16_bytes(values):
    """float32 values as bfloat16 bytes (round to nearest even), little-endian."""
    bits = numpy.ascontiguousarray(values, dtype="<f4").view("<u4").astype(numpy.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def write_safetensors(path, config, seed=SEED):
    """Random weights as one safetensors file: 8-byte header length, JSON header, the raw tensors."""
    rng = numpy.random.default_rng(seed)
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape in tensor_shapes(config).items():
        if name.endswith("norm.weight"):
            values = numpy.ones(shape, dtype=numpy.float32)
        else:
            values = rng.normal(0.0, config["initializer_range"], size=shape).astype(numpy.float32)
        blob = bfloat16_bytes(values)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(text)))
        handle.write(text)
        for blob in blobs:
            handle.write(blob)


def build(out):
    """Write the model directory ``out`` (replaced as a whole, so a half-written one is never left)."""
    digest = inputs_digest()
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".tiny-model.", dir=parent)
    try:
        tokenizer = train_tokenizer()
        tokenizer.save(os.path.join(work, "tokenizer.json"))
        ids = dict((token, tokenizer.token_to_id(token)) for token in SPECIAL)
        config = dict(CONFIG, bos_token_id=ids["<|begin_of_text|>"], eos_token_id=ids["<|im_end|>"])
        files = {
            "config.json": config,
            "generation_config.json": {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
                                       "do_sample": False},
            "tokenizer_config.json": {
                "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": CONFIG["max_position_embeddings"],
                "bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>", "pad_token": "<|end_of_text|>",
                "add_bos_token": False, "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE},
            "special_tokens_map.json": {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>",
                                        "pad_token": "<|end_of_text|>"},
        }
        for name, data in files.items():
            with open(os.path.join(work, name), "w") as handle:
                json.dump(data, handle, indent=2, sort_keys=True)
                handle.write("\n")
        write_safetensors(os.path.join(work, "model.safetensors"), config)
        with open(os.path.join(work, "llmstack-build.json"), "w") as handle:
            json.dump({"inputs": digest, "seed": SEED, "builder": "tools/build_tiny_model.py"}, handle, indent=2)
            handle.write("\n")
        for name in os.listdir(work):
            os.chmod(os.path.join(work, name), 0o644)
        os.chmod(work, 0o755)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.rename(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return digest


def current(out):
    """True when ``out`` was built from today's inputs."""
    try:
        with open(os.path.join(out, "llmstack-build.json")) as handle:
            return json.load(handle).get("inputs") == inputs_digest()
    except (OSError, ValueError):
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="model directory (default .cache/models/llmstack-tiny)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the inputs did not change")
    parser.add_argument("--check", action="store_true", help="exit 1 when the model is missing or out of date")
    args = parser.parse_args(argv)
    if args.check:
        return 0 if current(args.out) else 1
    if not args.force and current(args.out):
        print("build_tiny_model: %s is up to date" % args.out)
        return 0
    build(args.out)
    size = sum(os.path.getsize(os.path.join(args.out, name)) for name in os.listdir(args.out))
    print("build_tiny_model: built %s (%.1f MB)" % (args.out, size / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
