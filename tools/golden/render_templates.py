#!/usr/bin/python3
"""Golden outputs for ringlm's Jinja chat-template interpreter.

Renders every template in tests/fixtures/chat_templates/*.jinja with Debian's python3-jinja2 (the
reference implementation), configured the way Hugging Face transformers renders chat templates:

  * jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[<the `generation` tag extension>, jinja2.ext.loopcontrols])
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=None, separators=None,
    sort_keys=False) with those keyword arguments exposed
  * globals["raise_exception"] raises jinja2.exceptions.TemplateError(message)
  * globals["strftime_now"](fmt) formats the current local time; here the clock is pinned to
    FIXED_NOW so that outputs are reproducible (the C++ test pins the same local time)
  * render(messages=..., tools=..., documents=..., add_generation_prompt=...,
           **special_tokens_map, **chat_template_kwargs), then transformers'
    continue_final_message post-processing.

Writes tests/fixtures/chat_templates/conversations.json (the inputs) and
tests/fixtures/chat_templates/expected/<template>.json (output or error per conversation).

Also renders the language-feature snippets of tests/fixtures/chat_templates/snippets.json (each a
template and a context) and stores each one's output or error back into that file; snippets whose
output shows a Python object address (non-deterministic) are marked "skip".
Run with Debian's interpreter: /usr/bin/python3 tools/golden/render_templates.py
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
FIXED_NOW = datetime(2025, 3, 14, 9, 26, 53)


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker without tracking: {% generation %}body{% endgeneration %}
    is a call block whose caller renders the body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def continue_final(rendered, messages):
    """transformers' continue_final_message: cut right after the final message's content."""
    final = messages[-1]["content"]
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if "text" in block:
                final = block["text"]
                break
        else:
            raise ValueError("no text to continue in the final message")
    if final.strip() not in rendered:
        raise ValueError("the final message does not appear in the rendered chat")
    loc = rendered.rindex(final.strip())
    if rendered[loc:loc + len(final.lstrip())] == final:
        return rendered[:loc + len(final.lstrip())]
    return rendered[:loc + len(final.strip())]


def render(env, source, case, special_tokens):
    if case.get("continue_final_message") and case.get("add_generation_prompt"):
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    kwargs = dict(special_tokens)
    kwargs.update(case.get("extra", {}))
    out = env.from_string(source).render(
        messages=case["messages"], tools=case.get("tools"), documents=case.get("documents"),
        add_generation_prompt=case.get("add_generation_prompt", False), **kwargs)
    if case.get("continue_final_message"):
        out = continue_final(out, case["messages"])
    return out


# ---------------------------------------------------------------- inputs

WEATHER = {"type": "function", "function": {
    "name": "get_current_weather",
    "description": "Get the current weather in a given location — in °C or °F.",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]},
    "return": {"type": "number", "description": "temperature"}}}
CALC = {"type": "function", "function": {
    "name": "multiply",
    "description": "Multiply two numbers",
    "parameters": {"type": "object", "properties": {
        "a": {"type": "number", "description": "first factor", "default": 1.0},
        "b": {"type": "integer", "minimum": -5, "maximum": 10000000000}},
        "required": ["a", "b"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {
    "name": "brave_search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
U2 = {"role": "user", "content": "What is 2 + 2?"}
A2 = {"role": "assistant", "content": "2 + 2 = 4."}


def tool_call(name, args, call_id="abc123XYZ", as_string=False):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}


CASES = [
    {"name": "user_gen", "messages": [U1], "add_generation_prompt": True},
    {"name": "user_nogen", "messages": [U1], "add_generation_prompt": False},
    {"name": "system_user_gen", "messages": [SYS, U1], "add_generation_prompt": True},
    {"name": "multi_turn", "messages": [SYS, U1, A1, U2], "add_generation_prompt": True},
    {"name": "multi_turn_no_system_nogen", "messages": [U1, A1, U2, A2]},
    {"name": "unicode", "add_generation_prompt": True, "messages": [
        {"role": "user", "content": "Grüße, 世界! 😀 \"quotes\", 'apostrophes', \\backslash\\, tab\tand\nnewline"},
        {"role": "assistant", "content": "日本語の応答です。 Ünïcödé ✓"},
        {"role": "user", "content": "Ещё раз, пожалуйста 🙏"}]},
    {"name": "empty_content", "add_generation_prompt": True, "messages": [
        {"role": "user", "content": ""}, {"role": "assistant", "content": ""}, {"role": "user", "content": "x"}]},
    {"name": "whitespace_content", "add_generation_prompt": True, "messages": [
        {"role": "system", "content": "  Be brief.  \n"},
        {"role": "user", "content": "\n\n  padded question \t \n"},
        {"role": "assistant", "content": "  padded answer  \n\n"},
        {"role": "user", "content": "again "}]},
    {"name": "system_only_gen", "messages": [SYS], "add_generation_prompt": True},
    {"name": "tools_defined", "messages": [SYS, {"role": "user", "content": "Weather in Paris?"}],
     "tools": [WEATHER, CALC], "add_generation_prompt": True},
    {"name": "tools_no_system", "messages": [{"role": "user", "content": "What is 6 times 7?"}],
     "tools": [CALC], "add_generation_prompt": True},
    {"name": "tool_call_roundtrip", "tools": [WEATHER], "add_generation_prompt": True, "messages": [
        SYS, {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            tool_call("get_current_weather", {"location": "Paris, France", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "name": "get_current_weather",
         "content": "{\"temperature\": 18.5, \"sky\": \"cloudy\"}"}]},
    {"name": "tool_call_then_answer", "tools": [WEATHER, CALC], "messages": [
        {"role": "user", "content": "Multiply 3.5 by 4"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("multiply", {"a": 3.5, "b": 4})]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "content": "14.0"},
        {"role": "assistant", "content": "3.5 × 4 = 14."}]},
    {"name": "parallel_tool_calls", "tools": [WEATHER], "add_generation_prompt": True, "messages": [
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [
            tool_call("get_current_weather", {"location": "Paris"}, "call00001"),
            tool_call("get_current_weather", {"location": "東京", "unit": "celsius", "extra": [1, 2.0, None, True, {"k": "v"}]}, "call00002")]},
        {"role": "tool", "tool_call_id": "call00001", "content": "18"},
        {"role": "tool", "tool_call_id": "call00002", "content": "22"}]},
    {"name": "tool_args_as_string", "tools": [CALC], "messages": [
        {"role": "user", "content": "Multiply 2 by 3"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("multiply", {"a": 2, "b": 3}, as_string=True)]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "content": "6"},
        {"role": "assistant", "content": "It is 6."}], "add_generation_prompt": False},
    {"name": "tool_result_object", "tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [tool_call("get_current_weather", {"location": "Oslo"})]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "content": {"temperature": -3, "wind": [5, 7.25]}}],
     "add_generation_prompt": True},
    {"name": "tools_in_system_prompt", "tools": [CALC], "extra": {"tools_in_user_message": False},
     "messages": [SYS, {"role": "user", "content": "6*7?"}], "add_generation_prompt": True},
    {"name": "builtin_tools", "extra": {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]},
     "tools": [SEARCH], "messages": [
        SYS, {"role": "user", "content": "Search for the weather"},
        {"role": "assistant", "tool_calls": [tool_call("brave_search", {"query": "weather today"})]},
        {"role": "ipython", "content": "Sunny, 21 degrees"}], "add_generation_prompt": True},
    {"name": "date_string", "extra": {"date_string": "01 Jan 2025"}, "messages": [U1],
     "add_generation_prompt": True},
    {"name": "reasoning_content", "add_generation_prompt": True, "messages": [
        U1, {"role": "assistant", "content": "Fine.", "reasoning_content": "The user greets me.\nI should answer politely."},
        U2]},
    {"name": "reasoning_last_turn", "messages": [
        U2, {"role": "assistant", "content": "\n\nIt is 4.", "reasoning_content": "\nSimple arithmetic.\n"}]},
    {"name": "think_tags_in_content", "add_generation_prompt": True, "messages": [
        U2, {"role": "assistant", "content": "<think>\nAdd the numbers.\n</think>\n\nThe answer is 4."},
        {"role": "user", "content": "And 3 + 3?"}]},
    {"name": "enable_thinking_false", "extra": {"enable_thinking": False}, "messages": [U2],
     "add_generation_prompt": True},
    {"name": "enable_thinking_true", "extra": {"enable_thinking": True}, "messages": [SYS, U2],
     "add_generation_prompt": True},
    {"name": "content_parts", "add_generation_prompt": True, "messages": [
        {"role": "system", "content": [{"type": "text", "text": "Describe images carefully."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is in this picture?  "}]}]},
    {"name": "continue_final_message", "continue_final_message": True, "messages": [
        U2, {"role": "assistant", "content": "The answer is"}]},
    {"name": "roles_not_alternating", "messages": [U1, U2], "add_generation_prompt": True},
    {"name": "assistant_first", "messages": [A1, U1], "add_generation_prompt": True},
    {"name": "long_conversation", "add_generation_prompt": True, "messages": [SYS] + [
        m for i in range(12) for m in (
            {"role": "user", "content": f"Question number {i}: what is {i} squared?"},
            {"role": "assistant", "content": f"{i} squared is {i * i}."})] + [U2]},
    {"name": "special_chars", "add_generation_prompt": True, "messages": [
        {"role": "user", "content": "{{ not a template }} {% raw %} <|im_end|> </s> [INST] <think>"}]},
]

# Per-template special tokens (the tokenizer's special_tokens_map).
TEMPLATES = {
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"},
    "llama3_1_npm": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3_1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3_2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen2_5": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen2_5_generation": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen3": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<end_of_turn>", "pad_token": "<pad>", "unk_token": "<unk>"},
    "deepseek_v3": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "deepseek_r1_distill": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "mistral_v0_3": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_nemo": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_small_3_1": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "phi3_5": {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"},
    "phi4": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"},
    "phi4_mini": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"},
    "ringlm_kjv": {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"},
}


def main():
    env = make_env()
    with open(os.path.join(FIXTURES, "conversations.json"), "w", encoding="utf-8") as f:
        json.dump(CASES, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.makedirs(os.path.join(FIXTURES, "expected"), exist_ok=True)
    summary = []
    for name, special in TEMPLATES.items():
        with open(os.path.join(FIXTURES, name + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        results = {}
        for case in CASES:
            try:
                results[case["name"]] = {"output": render(env, source, case, special)}
            except Exception as e:  # the C++ side must raise too
                results[case["name"]] = {"error": f"{type(e).__name__}: {e}"}
        doc = {"template": name + ".jinja", "jinja2_version": jinja2.__version__,
               "fixed_now": FIXED_NOW.isoformat(), "special_tokens": special, "results": results}
        with open(os.path.join(FIXTURES, "expected", name + ".json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        ok = sum(1 for r in results.values() if "output" in r)
        summary.append(f"{name}: {ok} rendered, {len(results) - ok} raised")
    snippets_path = os.path.join(FIXTURES, "snippets.json")
    with open(snippets_path, encoding="utf-8") as f:
        snippets = json.load(f)
    for sn in snippets:
        for key in ("output", "error", "skip"):
            sn.pop(key, None)
        try:
            out = env.from_string(sn["template"]).render(**sn["context"])
            if " at 0x" in out:
                sn["skip"] = "output shows a Python object address"
            else:
                sn["output"] = out
        except Exception as e:
            sn["error"] = f"{type(e).__name__}: {e}"
    with open(snippets_path, "w", encoding="utf-8") as f:
        json.dump(snippets, f, ensure_ascii=False, indent=1)
        f.write("\n")
    summary.append(f"snippets: {sum('output' in s for s in snippets)} rendered, "
                   f"{sum('error' in s for s in snippets)} raised, {sum('skip' in s for s in snippets)} skipped")
    print("\n".join(summary))


if __name__ == "__main__":
    sys.exit(main())
