"""Dry-run stand-in for Hugging Face tokenizers: bytes plus special tokens (see ../README.md)."""
import json
import re
from types import SimpleNamespace

__version__ = "dryrun"


class _Any:
    def __init__(self, *args, **kwargs):
        self.kwargs = kwargs

    @staticmethod
    def alphabet():
        return [chr(b) for b in range(256)]


models = SimpleNamespace(BPE=_Any)
decoders = SimpleNamespace(ByteLevel=_Any)
processors = SimpleNamespace(TemplateProcessing=_Any)
pre_tokenizers = SimpleNamespace(ByteLevel=_Any)
trainers = SimpleNamespace(BpeTrainer=_Any)


class Tokenizer:
    def __init__(self, model):
        self.specials = []

    def train_from_iterator(self, texts, trainer):
        for _ in texts:
            pass
        self.specials = list(trainer.kwargs["special_tokens"])

    def token_to_id(self, token):
        return self.specials.index(token) if token in self.specials else None

    def get_vocab_size(self):
        return len(self.specials) + 256

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"dryrun": True, "specials": self.specials}, f)

    def encode(self, text, add_special_tokens=True):
        ids = [1] if add_special_tokens else []
        pattern = "(" + "|".join(re.escape(s) for s in self.specials) + ")"
        for part in re.split(pattern, text):
            if part in self.specials:
                ids.append(self.specials.index(part))
            else:
                ids.extend(len(self.specials) + b for b in part.encode("utf-8"))
        return SimpleNamespace(ids=ids)

    def encode_batch(self, texts, add_special_tokens=True):
        return [self.encode(t, add_special_tokens) for t in texts]

    def decode(self, ids, skip_special_tokens=False):
        out = b""
        for i in ids:
            if i < len(self.specials):
                out += b"" if skip_special_tokens else self.specials[i].encode()
            else:
                out += bytes([(i - len(self.specials)) % 256])  # the model's vocabulary is larger
        return out.decode("utf-8", "replace")
