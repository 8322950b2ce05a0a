"""Dry-run stand-in for transformers: configs, a tiny embedding+linear causal LM with
save_pretrained/from_pretrained, and AutoTokenizer.apply_chat_template through jinja2 as
transformers renders it (see ../README.md)."""
import json
import os
from types import SimpleNamespace

import jinja2
import torch

__version__ = "dryrun"


class _Config:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class LlamaConfig(_Config):
    model_type = "llama"


class Gemma3TextConfig(_Config):
    model_type = "gemma3_text"


class GenerationConfig(_Config):
    pass


class _TinyLM(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed = torch.nn.Embedding(config.vocab_size, 16)
        self.head = torch.nn.Linear(16, config.vocab_size)

    def forward(self, input_ids, use_cache=False):
        x = torch.cumsum(self.embed(input_ids), dim=1)  # causal: each position sees its prefix
        return SimpleNamespace(logits=self.head(x))

    def save_pretrained(self, directory, max_shard_size="50GB", **kwargs):
        os.makedirs(directory, exist_ok=True)
        conf = {k: v for k, v in self.config.__dict__.items() if not k.startswith("_")}
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(dict(conf, model_type=self.config.model_type), f)
        with open(os.path.join(directory, "generation_config.json"), "w") as f:
            json.dump(self.generation_config.__dict__, f)
        torch.save({"config": self.config, "state": self.state_dict()},
                   os.path.join(directory, "model.safetensors"))


class AutoModelForCausalLM:
    @staticmethod
    def from_config(config):
        return _TinyLM(config)

    @staticmethod
    def from_pretrained(directory, dtype=None, attn_implementation=None):
        blob = torch.load(os.path.join(directory, "model.safetensors"))
        model = _TinyLM(blob["config"])
        model.load_state_dict(blob["state"])
        return model.to(dtype or torch.float32)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(directory):
        with open(os.path.join(directory, "tokenizer_config.json")) as f:
            config = json.load(f)
        return _ChatTokenizer(config)


class _ChatTokenizer:
    def __init__(self, config):
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)
        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(config["chat_template"])
        self.special = {k: config[k] for k in ("bos_token", "eos_token", "pad_token")}

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        assert not tokenize
        return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                    **self.special)


import jinja2.sandbox  # noqa: E402
