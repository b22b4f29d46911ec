#!/usr/bin/env python3
"""Reference renderer for chat_template_test: renders chat templates with Python's Jinja2 set up
exactly as Hugging Face transformers' apply_chat_template does (the code vLLM runs), so the C++
interpreter can be compared byte for byte.

usage: chat_template_reference.py CASES_JSON OUT_JSON
CASES_JSON: {"template": str, "special_tokens": {name: str}, "cases": [{"messages": [...],
"tools": [...] | null, "add_generation_prompt": bool, "kwargs": {...}}]}
A case may carry its own "template" (used instead of the top-level one).
OUT_JSON: [{"text": str} | {"error": str}], one per case.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides Jinja's tojson (which escapes HTML and sorts keys) with this.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    template = env.from_string(spec["template"]) if "template" in spec else None
    out = []
    for case in spec["cases"]:
        if "template" in case:
            try:
                case_template = env.from_string(case["template"])
            except Exception as e:
                out.append({"error": f"{type(e).__name__}: {e}"})
                continue
        else:
            case_template = template
        kwargs = dict(spec.get("special_tokens", {}))
        kwargs.update(case.get("kwargs") or {})
        try:
            text = case_template.render(messages=case["messages"], tools=case.get("tools"),
                                   documents=None,
                                   add_generation_prompt=case.get("add_generation_prompt", False),
                                   **kwargs)
            out.append({"text": text})
        except Exception as e:  # the test compares error presence, not Python's wording
            out.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
