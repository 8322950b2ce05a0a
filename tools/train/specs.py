"""What tools/train/train.py builds: the tokenizer's special tokens and chat template, and the three
models (architecture, training budget). Plain data, importable without torch or transformers."""

VOCAB_SIZE = 4096
# Ids 0..5 in this order (the BPE trainer puts special tokens first).
PAD, BOS, EOS = "<pad>", "<s>", "</s>"
ROLES = ("system", "user", "assistant")
SPECIAL_TOKENS = [PAD, BOS, EOS] + [f"<|{r}|>" for r in ROLES]
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

# One turn: <|role|>\n content </s>\n ; the prompt for an answer ends with <|assistant|>\n.
# Only what ringlm's Jinja interpreter and transformers both render (see tests/jinja).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('roles are system, user and assistant') }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def render_chat(messages, add_generation_prompt=False):
    """CHAT_TEMPLATE in Python (train.py checks both agree on the data it renders)."""
    out = BOS
    for m in messages:
        if m["role"] not in ROLES:
            raise ValueError("roles are system, user and assistant")
        out += f"<|{m['role']}|>\n{m['content']}{EOS}\n"
    return out + ("<|assistant|>\n" if add_generation_prompt else "")


CONTEXT = 512  # training sequence length
COMMON = dict(vocab_size=VOCAB_SIZE, bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
              max_position_embeddings=2048, tie_word_embeddings=True)


def rope(theta):
    return {"rope_type": "default", "rope_theta": theta}


# name -> spec. budget_s bounds the training loop (steps are fixed from the measured step time);
# epochs bounds it in data passes. save_dtype: bf16 halves the size; the draft is small enough
# for f32. golden: prompt tokens and greedy length of the transformers golden.
MODELS = {
    "ringlm-kjv-llama": dict(
        config_class="LlamaConfig", params=dict(
            hidden_size=384, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=6,
            num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-5, rope_parameters=rope(10000.0),
            **COMMON),
        lr=1.5e-3, batch=64, epochs=3, budget_s=130, save_dtype="bfloat16",
        golden=dict(prompt=64, greedy=48)),
    # hidden 256: sqrt(hidden) = 16 is exact in bf16, so Gemma's embedding scale is the same
    # whether the weights are computed in bf16 or f32 (ringlm rounds it for bf16 embeddings).
    "ringlm-kjv-gemma3": dict(
        config_class="Gemma3TextConfig", params=dict(
            hidden_size=256, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, query_pre_attn_scalar=64, rms_norm_eps=1e-6,
            sliding_window=64, hidden_activation="gelu_pytorch_tanh",
            layer_types=["sliding_attention"] * 3 + ["full_attention"]
            + ["sliding_attention"] * 3 + ["full_attention"],
            rope_parameters={"full_attention": rope(100000.0), "sliding_attention": rope(10000.0)},
            **COMMON),
        lr=1.5e-3, batch=64, epochs=3, budget_s=100, save_dtype="bfloat16",
        golden=dict(prompt=160, greedy=64)),  # 2.5 windows of prompt, 3.5 with the continuation
    "ringlm-kjv-draft": dict(
        config_class="LlamaConfig", params=dict(
            hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-5, rope_parameters=rope(10000.0),
            **COMMON),
        lr=3e-3, batch=64, epochs=10, budget_s=30, save_dtype="float32",
        golden=dict(prompt=64, greedy=48)),
}

SMOKE = dict(budget_s=3.0, max_steps=12, golden_greedy=6, tokenizer_bytes=2_000_000)
WARMUP_STEPS = 100
MIN_LR_FRACTION = 0.1
WEIGHT_DECAY = 0.1
SEED = 1611

# Greedy samples for models/README.md: plain continuations and chat turns.
TEXT_PROMPTS = ["In the beginning God", "The LORD is my shepherd;", "CYNIC, n."]
CHAT_PROMPTS = ["Continue this verse: For God so loved the world,", "Define cynic.",
                "Quote John 11:35.", "What is a lawyer?"]
# The golden's chat question: the one of these whose greedy answer has the widest top-1/top-2 margin.
GOLDEN_CHATS = ["Define cynic.", "Define lawyer.", "Quote Genesis 1:1.",
                "Continue this verse: In the beginning God"]
GOLDEN_CHAT_TOKENS = 48
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_TOTAL_BYTES = 60 * 1024 * 1024
