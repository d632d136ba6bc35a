"""Write a tiny local model directory for molecule vllm: config.json of a 2-layer Llama (head_dim 32, set explicitly
while hidden / heads is 16, as tools/build_tiny_model.py's lab model) and one bfloat16 safetensors file of zeros
with its real header. Enough for vllm_model_facts and the planner; vLLM is not started here.

    make_model_dir.py DIRECTORY
"""

import json
import os
import struct
import sys

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 1024, "tie_word_embeddings": False, "vocab_size": 2048, "torch_dtype": "bfloat16",
}


def tensors():
    hidden, inter, heads, kv_heads, head_dim, vocab = 64, 128, 4, 2, 32, 2048
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
              "model.norm.weight": (hidden,)}
    for layer in range(2):
        prefix = "model.layers.%d." % layer
        shapes.update({prefix + "self_attn.q_proj.weight": (heads * head_dim, hidden),
                       prefix + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
                       prefix + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
                       prefix + "self_attn.o_proj.weight": (hidden, heads * head_dim),
                       prefix + "mlp.gate_proj.weight": (inter, hidden), prefix + "mlp.up_proj.weight": (inter, hidden),
                       prefix + "mlp.down_proj.weight": (hidden, inter),
                       prefix + "input_layernorm.weight": (hidden,),
                       prefix + "post_attention_layernorm.weight": (hidden,)})
    return shapes


def main(directory):
    os.makedirs(directory, exist_ok=True)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in sorted(tensors().items()):
        size = 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, sort_keys=True).encode()
    with open(os.path.join(directory, "model.safetensors"), "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(CONFIG, handle, indent=2, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
