"""The byte-level BPE tokenizer of ringlm's default models, trained with Hugging Face `tokenizers`,
and its tokenizer_config.json (special tokens, chat template). Only features ringlm's tokenizer
supports (src/tokenizer/tokenizer.h): BPE model, ByteLevel pre-tokenizer and decoder,
TemplateProcessing post-processor (prepends <s> when special tokens are added)."""
import json
import os

from specs import BOS, BOS_ID, CHAT_TEMPLATE, EOS, PAD, SPECIAL_TOKENS, VOCAB_SIZE


def train_tokenizer(texts, vocab_size=VOCAB_SIZE):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B:1", special_tokens=[(BOS, BOS_ID)])
    for expected, token in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(token) != expected:
            raise SystemExit(f"special token {token} got id {tok.token_to_id(token)}")
    return tok


def tokenizer_config():
    added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True}
             for i, t in enumerate(SPECIAL_TOKENS)}
    return {
        "added_tokens_decoder": added,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 2048,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def save_tokenizer(tok, directory):
    """Writes tokenizer.json and tokenizer_config.json into `directory`."""
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(), f, indent=2)
        f.write("\n")


def encode_batch(tok, docs):
    """Ids of documents whose special tokens are written out (nothing added)."""
    return [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]


def transformers_chat_renderer(directory, log):
    """transformers' apply_chat_template for the saved tokenizer (the reference rendering), or
    None with the reason logged if transformers cannot load it."""
    try:
        from transformers import AutoTokenizer
        hf = AutoTokenizer.from_pretrained(directory)
    except Exception as e:  # noqa: BLE001 - any failure means: no reference renderer
        log(f"  transformers could not load the tokenizer: {e!r}")
        return None

    def render(messages, add_generation_prompt):
        return hf.apply_chat_template(messages, tokenize=False,
                                      add_generation_prompt=add_generation_prompt)
    return render
