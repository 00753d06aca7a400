"""Python's jinja2 configured the way Hugging Face transformers renders chat templates.

transformers compiles chat templates in an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
the loopcontrols extension and an extension for the {% generation %} tag, replaces the `tojson` filter with
json.dumps(ensure_ascii=False) and adds the `raise_exception` and `strftime_now` globals. This module builds an
equivalent environment (our own code, written from transformers' documented behaviour) so the C++ engine can
be compared with the reference renderer on the same inputs.
"""

import json
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What raise_exception() throws, kept apart from jinja2's own errors so tests can compare messages."""


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: HF uses it to mark assistant spans; it renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _raise_exception(message):
    raise RaisedByTemplate(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


# Errors a template can cause in Python: jinja2's own, and the Python exceptions its expressions raise.
RENDER_ERRORS = (
    jinja2.exceptions.TemplateError,
    TypeError,
    ValueError,
    ZeroDivisionError,
    AttributeError,
    KeyError,
    IndexError,
    OverflowError,
    RecursionError,
)


class Reference:
    """Renders cases in the format spark-chat-render reads, returning the same result shape."""

    def __init__(self):
        self.env = make_environment()
        self.cache = {}

    def _template(self, text):
        if text not in self.cache:
            self.cache[text] = self.env.from_string(text)
        return self.cache[text]

    def render(self, case, file_template=None, default_template=None):
        if "template" in case:
            text = case["template"]
        elif case.get("default_template"):
            text = default_template
        else:
            text = file_template
        try:
            template = self._template(text)
            if "chat" in case:
                chat = case["chat"]
                # apply_chat_template: template_kwargs = {**special_tokens_map, **kwargs}
                kwargs = dict(chat.get("special_tokens", {}))
                kwargs.update(chat.get("kwargs", {}))
                result = template.render(
                    messages=chat.get("messages", []),
                    tools=chat.get("tools"),
                    documents=None,
                    add_generation_prompt=chat.get("add_generation_prompt", False),
                    **kwargs,
                )
            else:
                result = template.render(**case["context"])
            return {"ok": True, "text": result}
        except RaisedByTemplate as e:
            return {"ok": False, "kind": "raised", "detail": str(e)}
        except jinja2.exceptions.TemplateSyntaxError as e:
            return {"ok": False, "kind": "syntax", "detail": str(e)}
        except RENDER_ERRORS as e:
            return {"ok": False, "kind": "runtime", "detail": f"{type(e).__name__}: {e}"}
