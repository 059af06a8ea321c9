"""QTA test fixtures: a tiny REAL causal LM (1-layer Llama, byte-level BPE tokenizer trained on the fixture
catalog's text, SmolLM-style chat template) saved as a local HF folder, and a hashed bag-of-words encoder
for the frozen retriever (both in milliseconds; the packaged MiniLM is only used by the CLI test)."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_tiny_lm(folder, texts, seed: int = 0):
    """Train a byte-level BPE on ``texts`` and save a random 1-layer Llama (hidden 32) with it to ``folder``."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(list(texts), vocab_size=400, min_frequency=1, special_tokens=specials, show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


class BagOfWordsEncoder:
    """SentenceTransformer-like ``encode``: hashed bag of words, L2-normalised (deterministic, instant)."""

    dim = 256

    def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    from make_fixture import write_fixture_catalog  # tests/fixtures is on sys.path (tests/conftest.py)

    from toolret.catalog.datasets import load_dataset

    cat = load_dataset(str(write_fixture_catalog(tmp_path_factory.mktemp("lmcat") / "cat")))
    texts = [t.docs["original"] for t in cat.tools] + [q.text for q in cat.queries] * 3
    texts.append("Rewrite the user request as a search query for API tools. <tool> </tool> <query> </query>")
    return make_tiny_lm(tmp_path_factory.mktemp("tiny_lm") / "tiny-llama", texts)


@pytest.fixture
def bow_encoder():
    return BagOfWordsEncoder()
