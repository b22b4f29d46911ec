#!/usr/bin/env python3
"""Regenerates jinja_cases.inc: each construct template of chat_template_test rendered by
Python's Jinja2 set up as transformers' apply_chat_template sets it up (the expected outputs).
usage: python3 tests/tokenizer/gen_jinja_cases.py"""
import json
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
import jinja2
def raise_exception(m): raise jinja2.exceptions.TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"]=tojson; env.globals["raise_exception"]=raise_exception
V = '{"s": "Hello, World", "n": 3, "f": 2.5, "l": [3, 1, 2], "d": {"b": 1, "a": [1, "x"]}, "u": "héllo 你好", "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "extra": null}, {"role": "user", "content": "bye"}], "e": "", "z": null, "t": true}'
cases = [
 # whitespace control
 ("ws_lstrip_trim", "  {% if t %}\n  yes\n  {% endif %}\nend"),
 ("ws_minus", "a  {%- if t -%}  b  {%- endif -%}  c"),
 ("ws_var_minus", "a  {{- s -}}  b\n {{ n }} "),
 ("ws_plus", "  {%+ if t +%}\nx{% endif %}"),
 ("ws_comment", "a\n  {# note #}\nb {#- x -#} c"),
 ("ws_trailing_newline", "line\n"),
 ("ws_inline_block_not_stripped", "x  {% if t %}y{% endif %}\n"),
 ("ws_crlf", "a\r\n{% if t %}\r\nb\r\n{% endif %}\r\n"),
 ("raw", "{% raw %}{{ not parsed }}{% endraw %}!"),
 # control flow
 ("if_elif_else", "{% for i in [1, 2, 3] %}{% if i == 1 %}one{% elif i == 2 %}two{% else %}many{% endif %},{% endfor %}"),
 ("for_loop_vars", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}"),
 ("for_if", "{% for m in msgs if m.role == 'user' %}{{ loop.index }}:{{ m.content }}{{ '' if loop.last else ',' }}{% endfor %}"),
 ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}"),
 ("for_dict_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"),
 ("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}"),
 ("for_string", "{% for c in u %}[{{ c }}]{% endfor %}"),
 ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
 ("loop_scope", "{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}"),
 ("namespace", "{% set ns = namespace(count=0, last='') %}{% for m in msgs %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.count }} {{ ns.last }}"),
 ("loop_previtem_cycle", "{% for x in l %}{{ loop.cycle('a', 'b') }}{{ loop.previtem if loop.previtem is defined else '-' }}{% endfor %}"),
 ("set_block", "{% set greeting %}Hi {{ s }}{% endset %}[{{ greeting }}]"),
 ("set_tuple", "{% set a, b = [1, 2] %}{{ a }}{{ b }}"),
 ("macro", "{% macro tag(name, value='v') %}<{{ name }}={{ value }}>{% endmacro %}{{ tag('a') }}{{ tag('b', value=2) }}{{ tag('c', 3) }}"),
 ("macro_call_block", "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inner {{ n }}{% endcall %}"),
 ("filter_block", "{% filter upper %}abc {{ s }}{% endfilter %}"),
 ("ternary", "{{ 'yes' if t else 'no' }} {{ 'yes' if z else 'no' }} [{{ 'x' if z }}]"),
 # operators and literals
 ("arith", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 + 1 }} {{ -n }} {{ 10 - 2.5 }}"),
 ("concat", "{{ 'a' ~ 1 ~ none ~ true ~ z ~ undefined_var }} {{ 'ab' + 'cd' }} {{ [1] + [2] }} {{ 'ab' * 3 }} {{ 2 * [0] }}"),
 ("compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ [1, 2] < [1, 3] }} {{ true == 1 }}"),
 ("logic", "{{ t and 'x' }} {{ z or 'fallback' }} {{ not t }} {{ e or n }} {{ z and 1 }} {{ not z and t }}"),
 ("membership", "{{ 'ell' in s }} {{ 3 in l }} {{ 'a' in d }} {{ 'q' not in d }} {{ 9 not in l }} {{ 'x' in undefined_var }}"),
 ("literals", "{{ [1, 'two', 3.0, none, true, false, {'k': 'v'}] }} {{ {'a': 1, 'b': [True, None]} }} {{ (1, 2) }} {{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }}"),
 ("string_escapes", "{{ 'tab\\there\\nnew \\u00e9 \\x41 \\\\' }}"),
 ("floats", "{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 123.456 }} {{ 1e15 }} {{ 1e16 }} {{ 10 / 4 }} {{ 3.0 }} {{ 2.5e-3 }}"),
 ("print_values", "{{ z }} {{ t }} {{ l }} {{ d }} {{ msgs[1] }} [{{ undefined_var }}] {{ u }}"),
 ("attr_and_item", "{{ msgs[0].role }} {{ msgs[0]['content'] }} {{ msgs[-1].content }} {{ d.a[1] }} {{ d['a'][0] }} {{ l.0 }} [{{ msgs[1].missing }}] [{{ l[10] }}]"),
 ("slices", "{{ l[::-1] }} {{ l[1:] }} {{ l[:2] }} {{ l[::2] }} {{ u[1:4] }} {{ s[-5:] }} {{ s[::-1] }} {{ l[-2:] }} {{ l[5:] }} {{ msgs[1:][0].role }}"),
 # filters
 ("filter_trim_length", "[{{ '  pad \\n'|trim }}] {{ s|length }} {{ u|length }} {{ l|length }} {{ d|length }} {{ msgs|count }}"),
 ("filter_first_last_list", "{{ l|first }} {{ l|last }} {{ s|first }} {{ s|list }} {{ d|list }} {{ (msgs|last).content }}"),
 ("filter_join_replace_case", "{{ l|join(', ') }} {{ ['a','b']|join }} {{ msgs|join('/', attribute='role') }} {{ s|replace('l', 'L') }} {{ s|replace('l', '', 1) }} {{ s|lower }} {{ s|upper }} {{ 'hello world'|title }} {{ 'hELLO'|capitalize }}"),
 ("filter_string_default", "{{ n|string ~ 'x' }} [{{ undefined_var|default('dflt') }}] [{{ z|default('dflt') }}] [{{ e|default('dflt', true) }}] [{{ undefined_var|d }}]"),
 ("filter_items_dictsort", "{{ d|items|list }} {% for k, v in d|dictsort %}{{ k }}{% endfor %}"),
 ("filter_selectattr", "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }} {{ msgs|rejectattr('role', 'equalto', 'user')|list|length }} {{ msgs|selectattr('extra', 'none')|list|length }} {{ msgs|selectattr('extra', 'defined')|list|length }}"),
 ("filter_select_map", "{{ [0, 1, 2, none, 'x']|select|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3]|reject('even')|list }} {{ ['a', 'B']|map('upper')|list }} {{ msgs|map(attribute='nope', default='?')|list }}"),
 ("filter_tojson", "{{ d|tojson }} {{ msgs|tojson }} {{ u|tojson }} {{ 'q\"\\\\\\n<>&'|tojson }} {{ [1.0, 2.5, none, true]|tojson }} {{ {}|tojson }}"),
 ("filter_tojson_opts", "{{ d|tojson(indent=2) }}\n{{ d|tojson(sort_keys=true) }} {{ u|tojson(ensure_ascii=true) }} {{ d|tojson(separators=(',', ':')) }}"),
 ("filter_misc", "{{ -3|abs }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ '2.5'|float }} {{ 3|float }} {{ l|sort }} {{ l|sort(reverse=true) }} {{ l|reverse|list }} {{ 'abc'|reverse }} {{ l|sum }} {{ ['a', 'A', 'b']|unique|list }} {{ 'x'|safe }} {{ '<a&b>'|e }}"),
 ("filter_indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(4, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}"),
 # tests
 ("tests", "{{ n is defined }} {{ nope is undefined }} {{ z is none }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ l is sequence }} {{ n is number }} {{ f is number }} {{ n is integer }} {{ f is float }} {{ t is boolean }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ n is equalto 3 }} {{ t is true }} {{ t is false }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 3 is in l }} {{ z is not none }} {{ s is not string }} {{ n is eq(3) }} {{ n is gt 2 }} {{ d is iterable }} {{ 1 is mapping }}"),
 # methods
 ("str_methods", "{{ s.startswith('Hell') }} {{ s.endswith('x') }} {{ s.startswith(('a', 'H')) }} {{ s.split(', ') }} {{ ' a  b \\n c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} [{{ '\\n x \\n'.strip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '\\n\\nhi\\n'.lstrip('\\n') }}] [{{ 'hi  '.rstrip() }}] {{ s.replace('o', '0') }} {{ s.upper() }} {{ s.lower() }} {{ s.find('World') }} {{ u.find('你') }} {{ s.find('zz') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '123'.isdigit() }} {{ 'hello world'.title() }}"),
 ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ msgs[1].get('extra') is none }}"),
 ("content_split_qwen", "{% set c = '<think>\\nreason\\n</think>\\n\\nanswer' %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}"),
 ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b='x') }} {{ namespace(a=1).a }}"),
 ("fuzz_found", "{% if t: %}colon{% else: %}no{% endif %} {{ l[] is defined }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ [undefined_var, l[9]] }} {{ n if n > 2 else 0 }}"),
 ("unicode_passthrough", "{{ u }}|{{ u|upper }}|{{ u[0] }}{{ u[-1] }}|{{ '😀 emoji'|length }}"),
]
out = []
for name, tmpl in cases:
    try:
        r = env.from_string(tmpl).render(**json.loads(V))
        out.append((name, tmpl, r))
    except Exception as e:
        print("PYERR", name, type(e).__name__, e)
def cstr(s):
    b = s.encode('utf-8')
    r = '"'
    for ch in b:
        c = chr(ch)
        if c == '\\': r += '\\\\'
        elif c == '"': r += '\\"'
        elif c == '\n': r += '\\n'
        elif c == '\r': r += '\\r'
        elif c == '\t': r += '\\t'
        elif ch < 0x20 or ch >= 0x7f: r += '\\x%02x""' % ch
        else: r += c
    return r + '"'
import os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'jinja_cases.inc'), 'w') as f:
    f.write("// Generated by rendering each template with Python's Jinja2 3.1 configured as transformers does.\n")
    f.write("const char* const kVars = %s;\n" % cstr(V))
    f.write("const ConstructCase kConstructCases[] = {\n")
    for name, tmpl, r in out:
        f.write("    {%s,\n     %s,\n     %s},\n" % (cstr(name), cstr(tmpl), cstr(r)))
    f.write("};\n")
print(len(out), "cases")
