"""Deterministic random conversations for the chat-template parity test.

Each generator returns cases in spark-chat-render's "chat" form: messages, tools, add_generation_prompt,
kwargs and special tokens, as an OpenAI-compatible server would pass them to apply_chat_template. The text
pool is chosen to stress the engine: non-ASCII, quotes and backslashes, template-looking text, Unicode
whitespace at the edges (which |trim and .strip() remove), embedded </think>, and numbers whose JSON form
depends on Python's float formatting.
"""

import random

TEXTS = [
    "Hello!",
    "What's the weather in Paris today?",
    "多少钱？请用中文回答。",
    "Ünïcödé — naïve café, 東京, Ελληνικά, עברית, العربية",
    "emoji 😀🚀 and a ZWJ family 👨‍👩‍👧",
    'quotes "double" and \'single\' and `back`',
    "back\\slash \\n not a newline, \\u00e9 not an escape",
    "line one\nline two\n\nline four",
    "  leading and trailing spaces  ",
    "\n\nleading newlines",
    "trailing newlines\n\n",
    "\u3000ideographic spaces\u3000",
    "tab\tseparated\tvalues",
    "{{ not a variable }} {% if not a tag %} {# nor a comment #}",
    "looks like JSON: {\"a\": [1, 2, {\"b\": null}]}",
    "<tool_call>fake</tool_call> and <think>fake</think>",
    "",
    "a",
    "Numbers: 3.14159, 1e-7, -0.0, 10^6",
    "mixed\r\nline endings\rhere",
    "nbsp\u00a0inside and\u2028line separator",
    "SQL: SELECT * FROM t WHERE x = 'y'; -- comment",
    "The answer is 42.",
    "Résumé of the ticket: user can't log in after reset.",
]

REASONING = [
    "The user wants a simple answer.",
    "Let me think step by step.\n1. Parse.\n2. Answer.",
    "考虑一下用户的需求。",
    "  spaced reasoning  ",
    "\nreasoning with newlines\n",
    "I should call the tool with \"quoted\" args.",
]

ARG_VALUES = [
    "Paris",
    "München",
    "北京市",
    'say "hi"',
    "multi\nline",
    "back\\slash",
    "",
    0,
    42,
    -7,
    12345678901234,
    3.0,
    0.1,
    1e-07,
    1e21,
    -0.0,
    2.5e-10,
    True,
    False,
    None,
    [],
    {},
    [1, "two", 3.5, None],
    {"nested": {"deeper": [True, {"k": "v"}]}, "unit": "°C"},
    {"z": 1, "a": 2, "m": 3},
    ["😀", "ü"],
]

ARG_KEYS = ["city", "unit", "query", "limit", "options", "ключ", "名前", "z_last", "a_first", "filters", "flag"]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather — température actuelle.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. 東京"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {
                "required": ["query"],
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "filters": {
                        "type": "object",
                        "properties": {
                            "site": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "since": {"type": ["string", "null"], "format": "date"},
                        },
                    },
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "set_options",
            "description": "Set options: \"quoted\", back\\slash, newline\nhere.",
            "parameters": {
                "type": "object",
                "properties": {
                    "options": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"ключ": {"type": "string"}, "value": {"type": "number", "default": 0.5}},
                        },
                    },
                    "flag": {"type": "boolean", "default": False},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "no_params", "description": "Takes nothing.", "parameters": {"type": "object", "properties": {}}},
    },
    {
        "type": "function",
        "function": {
            "name": "名前を付ける",
            "description": "日本語の説明 😀",
            "parameters": {"type": "object", "properties": {"名前": {"type": "string"}}, "required": ["名前"]},
        },
    },
]


class Generator:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def text(self):
        return self.pick(TEXTS)

    def arguments(self):
        keys = self.rng.sample(ARG_KEYS, self.rng.randint(0, 4))
        return {k: self.pick(ARG_VALUES) for k in keys}

    def tools(self, max_tools=4):
        return [self.pick(TOOLS) for _ in range(self.rng.randint(1, max_tools))]

    def tool_call(self, string_args=False):
        args = self.arguments()
        call = {"id": "call_%d" % self.rng.randrange(10**6), "type": "function",
                "function": {"name": self.pick(TOOLS)["function"]["name"], "arguments": args}}
        if string_args:
            import json
            call["function"]["arguments"] = json.dumps(args, ensure_ascii=self.rng.random() < 0.5)
        return call

    def content_blocks(self):
        return [{"type": "text", "text": self.text()} for _ in range(self.rng.randint(0, 3))]

    def thinking_kwargs(self, kwargs):
        mode = self.rng.randrange(3)
        if mode == 1:
            kwargs["enable_thinking"] = True
        elif mode == 2:
            kwargs["enable_thinking"] = False
        return kwargs


def spark_conversations(seed, count):
    """Valid conversations for the Spark chat format."""
    g = Generator(seed)
    cases = []
    for i in range(count):
        messages = []
        system_mode = i % 3  # first / later / absent, evenly covered
        if system_mode == 0:
            messages.append({"role": "system", "content": g.text() if g.rng.random() < 0.7 else g.content_blocks()})
        turns = g.rng.randint(1, 4)
        for t in range(turns):
            user_content = g.text() if g.rng.random() < 0.7 else g.content_blocks()
            messages.append({"role": "user", "content": user_content})
            if system_mode == 1 and t == 0:
                messages.append({"role": "system", "content": g.text()})
            if t == turns - 1 and g.rng.random() < 0.5:
                break  # end on a user turn: the usual generation-prompt case
            assistant = {"role": "assistant"}
            roll = g.rng.random()
            if roll < 0.2:
                assistant["content"] = None
            elif roll < 0.35:
                assistant["content"] = g.content_blocks()
            else:
                assistant["content"] = g.text()
            if g.rng.random() < 0.5:
                assistant["reasoning_content"] = g.pick(REASONING) if g.rng.random() < 0.8 else ""
            if g.rng.random() < 0.4:
                assistant["tool_calls"] = [g.tool_call() for _ in range(g.rng.randint(1, 3))]
            elif g.rng.random() < 0.1:
                assistant["tool_calls"] = None
            messages.append(assistant)
            if assistant.get("tool_calls"):
                for _ in range(g.rng.randint(1, 3)):  # runs of consecutive tool results
                    result = g.text() if g.rng.random() < 0.8 else g.pick(ARG_VALUES)
                    messages.append({"role": "tool", "tool_call_id": "call_1", "content": result})
        tools = g.tools() if g.rng.random() < 0.5 else (None if g.rng.random() < 0.8 else [])
        cases.append({
            "name": "spark_%03d" % i,
            "chat": {
                "messages": messages,
                "tools": tools,
                "add_generation_prompt": g.rng.random() < 0.7,
                "kwargs": g.thinking_kwargs({}),
                "special_tokens": {"bos_token": "<｜start▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
            },
        })
    return cases


def spark_error_conversations(seed):
    """Conversations the Spark template must reject with raise_exception (or fail on), on both engines."""
    g = Generator(seed)
    user = {"role": "user", "content": "hi"}
    bad = [
        ("no_messages", []),
        ("unsupported_role_developer", [user, {"role": "developer", "content": "x"}]),
        ("unsupported_role_missing", [{"content": "no role"}]),
        ("unsupported_role_function", [{"role": "function", "content": "x"}]),
        ("bad_block_image", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
        ("bad_block_no_type", [{"role": "user", "content": [{"text": "no type"}]}]),
        ("bad_block_string_items", [{"role": "user", "content": ["plain string block"]}]),
        ("bad_content_dict", [{"role": "user", "content": {"type": "text", "text": "dict"}}]),
        ("bad_content_number", [{"role": "user", "content": 42}]),
        ("bad_system_block", [{"role": "system", "content": [{"type": "input_audio"}]}, user]),
        ("bad_assistant_block", [user, {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]),
        ("args_json_string", [user, {"role": "assistant", "content": "", "tool_calls": [g.tool_call(string_args=True)]}]),
        ("args_list", [user, {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": [1, 2]}}]}]),
        ("args_null", [user, {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": None}}]}]),
        ("args_missing", [user, {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "f"}}]}]),
        ("second_call_bad", [user, {"role": "assistant", "content": "x", "tool_calls": [
            g.tool_call(), {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]),
        ("tool_without_function", None),
    ]
    cases = []
    for name, messages in bad:
        tools = None
        if messages is None:  # a tool entry without "function": tojson of an undefined value fails
            messages = [user]
            tools = [{"type": "function", "name": "flat_style_tool"}]
        for gen_prompt in (True, False):
            cases.append({
                "name": "spark_error_%s_%s" % (name, "gen" if gen_prompt else "nogen"),
                "expect": "error",
                "chat": {"messages": messages, "tools": tools, "add_generation_prompt": gen_prompt, "kwargs": {}},
            })
    return cases


def qwen3_conversations(seed, count):
    """Conversations in the shape Qwen3's original template expects (string contents)."""
    g = Generator(seed)
    cases = []
    for i in range(count):
        messages = []
        if i % 3 == 0:
            messages.append({"role": "system", "content": g.text()})
        turns = g.rng.randint(1, 4)
        for t in range(turns):
            content = g.text()
            if g.rng.random() < 0.1:
                content = "<tool_response>\nfake\n</tool_response>"  # not a real query for last_query_index
            messages.append({"role": "user", "content": content})
            if i % 3 == 1 and t == 0 and g.rng.random() < 0.5:
                messages.append({"role": "system", "content": g.text()})
            if t == turns - 1 and g.rng.random() < 0.5:
                break
            assistant = {"role": "assistant", "content": g.text()}
            roll = g.rng.random()
            if roll < 0.3:
                assistant["reasoning_content"] = g.pick(REASONING)
            elif roll < 0.5:
                assistant["content"] = "<think>\n" + g.pick(REASONING) + "\n</think>\n\n" + g.text()
            elif roll < 0.55:
                assistant["reasoning_content"] = None
            if g.rng.random() < 0.4:
                assistant["tool_calls"] = [g.tool_call(string_args=g.rng.random() < 0.3)
                                           for _ in range(g.rng.randint(1, 3))]
                if g.rng.random() < 0.3:
                    assistant["content"] = ""
            messages.append(assistant)
            if assistant.get("tool_calls"):
                for _ in range(g.rng.randint(1, 3)):
                    messages.append({"role": "tool", "content": g.text()})
        tools = g.tools() if g.rng.random() < 0.5 else None
        cases.append({
            "name": "qwen3_%03d" % i,
            "chat": {
                "messages": messages,
                "tools": tools,
                "add_generation_prompt": g.rng.random() < 0.7,
                "kwargs": g.thinking_kwargs({}),
                "special_tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
            },
        })
    return cases


def llama3_conversations(seed, count):
    """Conversations for the Llama 3.1/3.3 template: ipython/tool roles, tools in the user message,
    builtin tools, date strings, and its single-tool-call rule."""
    g = Generator(seed)
    builtin = ["brave_search", "wolfram_alpha", "code_interpreter"]
    cases = []
    for i in range(count):
        kwargs = {}
        if g.rng.random() < 0.5:
            kwargs["date_string"] = g.pick(["26 Jul 2024", "01 Jan 2025", "3 March 2026"])
        if g.rng.random() < 0.25:
            kwargs["builtin_tools"] = g.rng.sample(builtin, g.rng.randint(1, 3))
        if g.rng.random() < 0.3:
            kwargs["tools_in_user_message"] = g.rng.random() < 0.5
        messages = []
        if i % 3 == 0:
            messages.append({"role": "system", "content": g.text()})
        turns = g.rng.randint(1, 3)
        for t in range(turns):
            messages.append({"role": "user", "content": g.text()})
            if t == turns - 1 and g.rng.random() < 0.5:
                break
            if g.rng.random() < 0.4:
                call = g.tool_call()
                if kwargs.get("builtin_tools") and g.rng.random() < 0.5:
                    call["function"]["name"] = g.pick(kwargs["builtin_tools"])
                    call["function"]["arguments"] = {"query": g.pick(["weather", "2+2", "日本"])}
                messages.append({"role": "assistant", "tool_calls": [call]})
                result = g.pick([g.text(), {"temperature": 21.5, "unit": "°C"}, [1, 2, 3]])
                messages.append({"role": g.pick(["tool", "ipython"]), "content": result})
            messages.append({"role": "assistant", "content": g.text()})
        tools = g.tools() if g.rng.random() < 0.5 else None
        if g.rng.random() < 0.1:
            kwargs["custom_tools"] = g.tools(2)
        cases.append({
            "name": "llama3_%03d" % i,
            "chat": {
                "messages": messages,
                "tools": tools,
                "add_generation_prompt": g.rng.random() < 0.7,
                "kwargs": kwargs,
                "special_tokens": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
            },
        })
    # The template's own raise_exception paths.
    call = g.tool_call()
    two_calls = {"role": "assistant", "tool_calls": [call, call]}
    cases.append({"name": "llama3_error_two_calls", "expect": "error",
                  "chat": {"messages": [{"role": "user", "content": "x"}, two_calls], "tools": None,
                           "add_generation_prompt": False, "kwargs": {}}})
    cases.append({"name": "llama3_error_no_user_for_tools", "expect": "error",
                  "chat": {"messages": [{"role": "system", "content": "s"}], "tools": [TOOLS[0]],
                           "add_generation_prompt": True, "kwargs": {}}})
    return cases
