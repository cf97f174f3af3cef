"""Builds the tiny local Llama model directory the e2e run serves.

Owns: a config.json small enough for a 2-core CPU yet valid for vLLM's CPU
attention (hidden 256, 4 heads -> head size 64, 2 layers), and a byte-level
BPE tokenizer trained here with the `tokenizers` library on generated text
(tokenizer.json + tokenizer_config.json, no chat template). Nothing comes
from a hub: weights are random at load time (`--load-format dummy`), and
HF_HUB_OFFLINE=1 is set by the caller. Idempotent: an existing complete
directory built with the same recipe (stamp file) is left alone.

Usage: python make_tiny_model.py DIR
"""

import json
import os
import random
import sys

RECIPE = "tiny-llama-v1: hidden256 heads4 layers2 vocab2048 bpe-bytelevel seed0"
VOCAB = 2048


def _corpus(n_lines=4000, seed=0):
    # Words made of syllables so BPE learns merges; deterministic.
    rng = random.Random(seed)
    syll = ["ka", "to", "ri", "men", "sa", "lo", "ve", "tra", "qu", "in", "or", "el", "un", "ba", "di", "pe",
            "ster", "ly", "ng", "th", "ou", "an", "ce", "mi", "zo", "wa", "ru", "te", "fo", "gi"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    words += ["the", "a", "of", "and", "to", "in", "is", "request", "trace", "span", "model", "token"]
    for _ in range(n_lines):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(5, 25)))
        yield line.capitalize() + rng.choice([".", "!", "?", ",", ";"]) + " " + str(rng.randint(0, 9999))


def build(d):
    stamp = os.path.join(d, ".mstrace-recipe")
    needed = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json")
    if os.path.exists(stamp) and open(stamp).read() == RECIPE and all(os.path.exists(os.path.join(d, f)) for f in needed):
        print("tiny model: reusing %s" % d)
        return
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    os.makedirs(d, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.save(os.path.join(d, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "model_max_length": 512, "add_bos_token": False,
                   "clean_up_tokenization_spaces": False}, fh, indent=1)
    with open(os.path.join(d, "special_tokens_map.json"), "w") as fh:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, fh, indent=1)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
        "head_dim": 64, "num_hidden_layers": 2, "vocab_size": vocab, "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(config, fh, indent=1)
    with open(os.path.join(d, "generation_config.json"), "w") as fh:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}, fh, indent=1)
    with open(stamp, "w") as fh:
        fh.write(RECIPE)
    print("tiny model: built %s (vocab %d)" % (d, vocab))


if __name__ == "__main__":
    build(sys.argv[1])
