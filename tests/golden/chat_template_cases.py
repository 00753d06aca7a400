"""Small templates exercising one engine feature each, rendered by both engines and compared.

Each case is (name, template, context); the parity test renders it with spark-chat-render and with Python's
jinja2 (Hugging Face settings) and requires identical text, or an error on both sides (with the same message
when the template called raise_exception).
"""

CONTEXT = {
    "x": "defined",
    "xs": [1, "two", 3.5, None, True],
    "nums": [3, 1, 2],
    "d": {"a": 1, "b": {"c": "deep"}, "z": [1, 2]},
    "users": [
        {"name": "ann", "admin": True, "age": 31},
        {"name": "bob", "admin": False, "age": 19},
        {"name": "cyd", "admin": True},
    ],
    "schema": {"type": "array", "items": {"type": "string"}, "description": "tags — non-ASCII ünïcode"},
    "c": "<think>\nreason here\n</think>\n\nthe answer",
    "text": "Hello, 世界! ✓ \"quoted\" 'single' back\\slash\ttab",
    "empty": [],
    "zero": 0,
    "nothing": None,
    "flag": False,
    "big": 12345678901234,
    "f": 2.5,
}

_WHITESPACE = [
    ("lstrip_trim_if", "a\n  {% if true %}\n  b\n  {% endif %}\nc"),
    ("lstrip_trim_for", "{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}"),
    ("minus_both_sides", "a  {%- if true %} b {% endif -%}  c"),
    ("comment_minus", "a\n{#- comment -#}\nb"),
    ("comment_lstrip_trim", "  {# comment #}\nx"),
    ("comment_inline", "a {# c #} b\n{# c2 #} d"),
    ("plus_disables_lstrip", "  {%+ if true %}x{% endif %}"),
    ("plus_disables_trim", "x {% if true +%}\ny{% endif %}"),
    ("variable_minus", "a   {{- ' v ' -}}   b"),
    ("variables_not_lstripped", "line1\n    {{ 'v' }}\nline2"),
    ("crlf", "a\r\nb\r\n{% if true %}\r\nc{% endif %}\r\n"),
    ("trailing_newline_dropped", "x\n"),
    ("two_trailing_newlines", "x\n\n"),
    ("raw_block", "{% raw %}{{ not parsed }} {% if %}{% endraw %}!"),
    ("raw_lstrip", "  {% raw %}x{% endraw %}\n y"),
    ("ideographic_space_strip", "a\u3000{%- if true %}b{% endif %}"),
    ("ideographic_space_lstrip", "x\n\u3000 {% if true %}y{% endif %}"),
    ("lstrip_only_blank_prefix", "ab {% if true %}y{% endif %}"),
    ("block_then_spaces", "{% if true %}  \n{% endif %}z"),
    ("minus_eats_newlines", "{%- set x = 1 -%}\n\n\n{{ x }}\n\n"),
    ("var_newline_kept", "{{ 'a' }}\n{{ 'b' }}\n"),
    ("nested_line_starting", "{% if true %}\n  {% if true %}x{% endif %}\n{% endif %}"),
    ("inline_tags_same_line", "a\n  {% if true %}b{% endif %}  \nc"),
    ("minus_end_then_data", "{% if true -%}\n\n   x{%- endif %}"),
    ("comment_at_start", "{# first #}\n{{ 1 }}"),
    ("tab_indented_blocks", "\t{% for i in range(2) %}\n\t{{ i }}\n\t{% endfor %}"),
    ("macro_whitespace", "{% macro m() %}\n  inside\n{% endmacro %}[{{ m() }}]"),
    ("data_with_braces", "{ not a tag } {{ '{' }} }}"),
]

_LITERALS = [
    ("string_escapes", r"""{{ 'a\'b' }}|{{ "q\"q" }}|{{ 'tab\there' }}|{{ '\u00e9\x41\101' }}|{{ 'a' 'b' }}|{{ '\\' }}|{{ 'x\qy' }}"""),
    ("number_literals", "{{ 1_000 }} {{ 0x1f }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1e-5 }} {{ 12.0 }} {{ 1e16 }} {{ 123456789.123 }} {{ 2E3 }}"),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 0.5 }} {{ 10 / 4 }} {{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 7.0 // 2 }} {{ 2 ** -2 }}"),
    ("string_and_list_ops", "{{ 'ab' * 3 }}|{{ 3 * 'x' }}|{{ [1] * 2 }}|{{ 'a' ~ 1 ~ none ~ true ~ 1.0 }}|{{ 'a' + 'b' }}|{{ [1,2] + [3] }}|{{ (1,2) + (3,) }}|{{ 'x' * 0 }}|{{ 'x' * -1 }}"),
    ("bool_arithmetic_and_equality", "{{ true + 1 }} {{ true * 3 }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 2 > 1 > 0 }} {{ 1 < 2 < 2 }} {{ 1 != 2 }} {{ 2 >= 2 }} {{ 'b' <= 'a' }} {{ [1] == [1] }} {{ (1,) == [1] }} {{ {'a': 1} == {'a': 1} }}"),
    ("membership", "{{ 'a' in 'cat' }} {{ 1 in [1,2] }} {{ 'k' in {'k':1} }} {{ 3 not in [1] }} {{ 'x' not in 'y' }} {{ 1.0 in [1] }} {{ 'b' in d }} {{ 'c' in d }}"),
    ("and_or_not", "{{ 0 or 'x' }}|{{ '' and 'y' }}|{{ none or [] }}|{{ 1 and 2 }}|{{ not 0 }}|{{ not none }}|{{ not [] }}|{{ not 'a' and 'b' }}|{{ flag or zero or nothing }}"),
    ("ternary", "{{ 'y' if true else 'n' }}{{ 'y' if false else 'n' }}{{ 'y' if false }}[{{ 'a' if 0 }}]{{ 1 if none else 2 if true else 3 }}"),
    ("float_repr", "{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 2.5e-10 }} {{ 1e100 }} {{ -0.0 }} {{ 100.0 }} {{ 1e15 }} {{ 1.5e15 }} {{ 123456789012345678.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }} {{ f * 2 }}"),
    ("list_repr_quotes", r"""{{ ["it's", 'say "hi"', 'both \' "', '\n\t', 'é', '\x00', '\x7f', '\u00a0', '\u3000', '😀'] }}"""),
    ("tuple_repr", "{{ (1,) }}{{ () }}{{ (1, 'a') }}{{ ((1,2),) }}{{ (none, true) }}"),
    ("dict_repr", "{{ {'a': 1, 'b': [none, true], 'c': {'d': 'e'}} }}{{ {} }}{{ [] }}{{ d }}{{ users[0] }}"),
    ("context_value_printing", "{{ xs }}|{{ nothing }}|{{ flag }}|{{ big }}|{{ f }}|{{ text }}"),
    ("concat_precedence", "{{ 'n=' ~ 2 * 3 }}|{{ ('n=' ~ 3) ~ 4 }}|{{ 'a' ~ 1 == 'a1' }}|{{ (1 + 2) ~ 3 * 2 }}"),
    ("unary_minus_filter", "{{ -3|abs }} {{ (-3)|abs }} {{ -2.5|abs }} {{ - 3 }} {{ +3 }} {{ -(-3) }} {{ -true }}"),
]

_ACCESS = [
    ("attribute_and_item", "{{ d.a }}{{ d['a'] }}{{ d.b.c }}{{ d['b']['c'] }}{{ xs[0] }}{{ xs[-1] }}{{ xs.1 }}[{{ d.missing }}][{{ d.missing is defined }}]"),
    ("dict_method_names_vs_keys", "{{ schema['items'] }}|{{ schema.items is defined }}|{{ schema.get('type') }}|{{ schema['type'] }}|{{ schema.keys()|list }}"),
    ("dict_get", "{{ d.get('x', 'def') }}|{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('b').c }}"),
    ("dict_iteration", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for v in d.values() %}{{ v }}{% endfor %}|{{ d.keys()|list }}|{{ d.keys() }}|{{ d.items()|list }}|{{ d.values() }}|{{ d.items() }}"),
    ("slicing", "{{ 'hello'[1:3] }}|{{ 'hello'[::-1] }}|{{ 'hello'[-3:] }}|{{ xs[1:] }}|{{ xs[:-1] }}|{{ xs[::2] }}|{{ xs[::-1] }}|{{ xs[5:] }}|{{ xs[-100:2] }}|{{ 'héllo wörld'[2:8] }}|{{ xs[3:1:-1] }}|{{ nums[none:2] }}|{{ (1,2,3)[1:] }}"),
    ("string_index", "{{ 'abc'[1] }}{{ 'abc'[-1] }}{{ '日本語'[1] }}{{ 'abc'[5] is defined }}{{ 'abc'[true] }}"),
    ("missing_chains", "{{ nothing.x is defined }}|{{ xs[10] is defined }}|{{ d.a.b is defined }}|{{ d['missing'] is undefined }}|{{ users[5] is defined }}"),
    ("subscript_by_attribute", "{{ 'abc'['upper']() }}|{{ d['get']('a') }}|{{ xs['count'](1) }}"),
    ("list_methods", "{{ nums.index(1) }}{{ [1,1,2].count(1) }}{{ (1,2,2).count(2) }}"),
]

_FILTERS = [
    ("length_count", "{{ xs|length }} {{ 'héllo'|length }} {{ d|length }} {{ xs|count }} {{ ''|length }} {{ users|length }}"),
    ("default", "{{ u|default('x') }}|{{ nothing|default('x') }}|{{ ''|default('x', true) }}|{{ 0|d('z', true) }}|{{ u|default }}|{{ flag|default('x') }}|{{ d.missing|default('dm') }}|{{ u|default(boolean=true) }}"),
    ("trim", "[{{ '  a b  '|trim }}][{{ '\u3000x\u3000'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ nothing|trim }}][{{ 12|trim }}][{{ '\n\t x \r\n'|trim }}]"),
    ("case_filters", "{{ 'hello wORLD'|upper }} {{ 'ÉCOLE Ünï'|lower }} {{ 'hello WORLD'|capitalize }} {{ 'hello-world foo_bar (x) [y]'|title }} {{ \"they're bill's\"|title }} {{ 'éa'|capitalize }} {{ 'straße'|upper }} {{ 123|upper }}"),
    ("join", "{{ xs|join(', ') }}|{{ [1, none, 'a']|join }}|{{ users|join(', ', attribute='name') }}|{{ 'abc'|join('-') }}|{{ d|join(',') }}"),
    ("first_last", "{{ xs|first }}{{ xs|last }}{{ 'abc'|first }}{{ 'abc'|last }}{{ d|first }}{{ d|last }}{{ []|first is defined }}{{ []|last is defined }}"),
    ("replace", "{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'a.b.c'|replace('.', '') }}|{{ 123|replace('2', 'x') }}"),
    ("conversions", "{{ 'abc'|list }}{{ d|list }}{{ 123|string }}{{ [1]|string }}{{ '42'|int }}{{ '4.7'|int }}{{ 'x'|int }}{{ 'x'|int(7) }}{{ 3.9|int }}{{ -3.9|int }}{{ '0x1A'|int(0, 16) }}{{ ' 12 '|int }}{{ '1_000'|int }}{{ '2.5'|float }}{{ 'x'|float }}{{ 3|float }}{{ true|int }}{{ nothing|int }}{{ '1e3'|float }}{{ ' -7 '|int }}{{ '+5'|int }}"),
    ("tojson", "{{ d|tojson }}|{{ xs|tojson }}|{{ 'é\"\\\n/'|tojson }}|{{ nothing|tojson }}|{{ 1.0|tojson }}|{{ schema|tojson }}|{{ (1,2)|tojson }}|{{ text|tojson }}|{{ f|tojson }}|{{ big|tojson }}"),
    ("tojson_options", "{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ {'b':1,'a':[1,{'c':2}]}|tojson(indent=4) }}|{{ 'é😀\x7f'|tojson(true) }}|{{ [[], {}]|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(indent='\t') }}|{{ users|tojson(indent=0) }}"),
    ("items_filter", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}|{% for k, v in u|items %}x{% endfor %}"),
    ("select_map", "{{ users|selectattr('admin')|map(attribute='name')|join(',') }}|{{ users|rejectattr('admin')|list|length }}|{{ users|selectattr('name', 'equalto', 'bob')|list }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3]|reject('even')|list }}|{{ ['a','B']|map('upper')|list }}|{{ users|map(attribute='age', default=0)|list }}|{{ users|selectattr('age', 'defined')|selectattr('age', 'gt', 20)|list|length }}|{{ [0,1,'',none,'x']|select|list }}|{{ [1,2]|map('string')|join('-') }}|{{ users|map(attribute='name')|map('upper')|list }}"),
    ("sort_unique_minmax", "{{ nums|sort }}|{{ ['b','A','c']|sort }}|{{ ['b','A','c']|sort(case_sensitive=true) }}|{{ users|selectattr('age', 'defined')|sort(attribute='age')|map(attribute='name')|list }}|{{ nums|sort(reverse=true) }}|{{ ['a','A','b']|unique|list }}|{{ nums|min }}|{{ nums|max }}|{{ nums|sum }}|{{ users|selectattr('age', 'defined')|sum(attribute='age') }}|{{ nums|reverse|list }}|{{ 'abc'|reverse }}|{{ {'b':1,'a':2}|dictsort }}|{{ {'b':1,'a':2}|dictsort(by='value') }}|{{ ['B','a']|max }}|{{ []|max is defined }}"),
    ("batch_indent_center", "{{ [1,2,3,4,5]|batch(2)|list }}|{{ [1,2,3]|batch(2, 'x')|list }}|{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|[{{ 'ab'|center(7) }}]|[{{ 'abc'|center(8) }}]"),
    ("misc_filters", "{{ 'one two, three_x 4'|wordcount }}|{{ '<a href=\"x\">&\\'</a>'|e }}|{{ 2.675|round(2) }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 3|round }}|{{ 2.1|round(0, 'ceil') }}|{{ -2.5|round(0, 'floor') }}|{{ nothing|safe }}|{{ 1234.5678|round(-2) }}|{{ 'x'|escape }}"),
    ("generator_truthiness", "{{ 'yes' if []|select else 'no' }}|{{ 'yes' if []|select|list else 'no' }}|{{ 'yes' if nums|reverse else 'no' }}"),
    ("chained_filters_precedence", "{{ 'a' ~ 'b'|upper }}|{{ ('a' ~ 'b')|upper }}|{{ xs|length + 1 }}|{{ '  x '|trim|length }}|{{ -1 + nums|length }}"),
]

_TESTS = [
    ("type_tests", "{{ x is defined }}{{ u is undefined }}{{ nothing is none }}{{ 1 is number }}{{ true is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 'a' is string }}{{ d is mapping }}{{ xs is mapping }}"),
    ("container_tests", "{{ xs is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ u is iterable }}{{ xs is sequence }}{{ d is sequence }}{{ 'a' is sequence }}{{ 1 is sequence }}{{ u is sequence }}{{ nothing is iterable }}{{ d.keys() is sequence }}{{ d.keys() is iterable }}{{ (1,) is sequence }}"),
    ("value_tests", "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'aB' is lower }}{{ 'a' is in 'cat' }}{{ 1 is in [2] }}"),
    ("comparison_tests", "{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 1 is lt 2 }}{{ 1 is le 0 }}{{ 1 is ne 2 }}{{ 2 is greaterthan 1 }}{{ 1 is lessthan 1 }}"),
    ("identity_and_meta_tests", "{{ nothing is sameas none }}{{ true is sameas true }}{{ 1 is sameas 1 }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ range is callable }}{{ 1 is callable }}{{ x is not none }}{{ not x is none }}{{ loop is defined }}{{ u is callable }}"),
    ("test_precedence", "{{ not nothing is none }}|{{ 1 + 1 is number }}|{{ x is string and xs is iterable }}|{{ 'y' if x is defined else 'n' }}|{{ x is not string or 1 }}"),
]

_STATEMENTS = [
    ("loop_variables", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% else %}empty{% endfor %}"),
    ("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in u %}x{% else %}undef{% endfor %}"),
    ("previtem_nextitem", "{% for x in nums %}{{ loop.previtem|default('^') }}{{ x }}{{ loop.nextitem|default('$') }} {% endfor %}{% for x in nums %}{{ loop.previtem is undefined }}{% endfor %}"),
    ("cycle_changed", "{% for x in [1,1,2,3,3] %}{{ loop.cycle('a','b') }}{% if loop.changed(x) %}*{% endif %}{% endfor %}"),
    ("loop_filter", "{% for x in xs if x is number %}{{ loop.index }}/{{ loop.length }}:{{ x }}{{ loop.last }} {% endfor %}"),
    ("tuple_unpacking", "{% for a, b in [(1, 2), [3, 4], 'xy'] %}{{ a }}{{ b }}{% endfor %}{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}"),
    ("nested_loops", "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }}{{ loop.index }}{% endfor %}|{{ loop.index }}{% endfor %}"),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in range(3) %}{% for j in range(3) %}{% if j == 1 %}{% break %}{% endif %}{{ i }}{{ j }}{% endfor %}{% endfor %}"),
    ("break_in_inner_else", "{% for i in range(3) %}{% for j in [] %}{% else %}{% if i == 1 %}{% break %}{% endif %}e{% endfor %}{{ i }}{% endfor %}"),
    ("loop_scoping", "{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }}|{% for i in [1,2] %}{% if i > 1 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]"),
    ("if_scoping", "{% if true %}{% set inner = 'set in if' %}{% endif %}{{ inner }}"),
    ("namespace", "{% set ns = namespace(total=0, items=[]) %}{% for i in range(4) %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.total }}{{ ns.items }}{{ ns.missing is defined }}"),
    ("namespace_init_forms", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}{% set ns2 = namespace([('k', 'v')]) %}{{ ns2.k }}{{ ns }}"),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, %}{{ t }}{% set p = (3, 4) %}{% set m, n = p %}{{ m }}{{ n }}"),
    ("set_block", "{% set x %}  hello {{ 1 + 1 }} {% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}{% set z | trim | title %}  two words  {% endset %}[{{ z }}]"),
    ("if_elif_else", "{% for v in [0, 1, 2, 'x', none] %}{% if v == 1 %}one{% elif v == 2 %}two{% elif v is string %}str{% else %}other{% endif %};{% endfor %}"),
    ("if_tuple_test", "{% if 0, %}tuple-truthy{% endif %}"),
    ("macro_defaults_kwargs", "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet('C', punct='?') }} {{ greet(name='D') }}"),
    ("macro_missing_argument", "{% macro m(a, b) %}[{{ a }}][{{ b }}][{{ b is defined }}]{% endmacro %}{{ m(1) }}"),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}{{ m(5) }}"),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}"),
    ("macro_late_global", "{% macro m() %}{{ gx }}{% endmacro %}{% set gx = 5 %}{{ m() }}"),
    ("macro_closure_in_loop", "{% for i in [1,2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}"),
    ("macro_default_uses_param", "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}{{ m(3, 1) }}"),
    ("macro_local_set", "{% set x = 1 %}{% macro m() %}{% set x = 2 %}{{ x }}{% endmacro %}{{ m() }}{{ x }}"),
    ("macro_returns_string", "{% macro m() %}42{% endmacro %}{{ m() is string }}{{ m() + '!' }}{{ m()|int + 1 }}{{ m()|length }}"),
    ("call_block", "{% macro box(title) %}[{{ title }}:{{ caller() }}]{% endmacro %}{% call box('t') %}inside {{ 1 }}{% endcall %}"),
    ("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1,2]) %}<{{ item }}>{% endcall %}"),
    ("filter_block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}|{% filter trim|upper %}  x  {% endfilter %}"),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a is defined }}]"),
    ("generation_tag", "{% generation %}x{{ 1 }}{% endgeneration %}y"),
    ("print_tag", "{% print 'a' %}{% print 1 + 1 %}"),
    ("comment_with_tags", "a{# comment {{ x }} {% if %} #}b"),
    ("range_and_dict", "{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(0)|list }}{{ dict(a=1, b='x') }}{{ range(3)|length }}"),
    ("loop_over_string_and_dict", "{% for ch in 'héllo' %}{{ ch }}.{% endfor %}{% for k in d %}{{ k }}{% endfor %}"),
    ("star_args_call", "{% macro m(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ m(*[1, 2]) }}{{ m(**{'a': 3, 'b': 4}) }}"),
]

_METHODS = [
    ("strip_family", "[{{ '  x  '.strip() }}][{{ 'xxhixx'.strip('x') }}][{{ '  x '.lstrip() }}][{{ ' x  '.rstrip() }}][{{ '\u3000\u00a0x\u2028'.strip() }}][{{ 'abcba'.strip('ab') }}]"),
    ("split_family", "{{ 'a,b,,c'.split(',') }}{{ ' a  b \n c '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}{{ '  a b  c '.split(none, 1) }}{{ ' a b c  '.rsplit(none, 1) }}{{ ''.split() }}{{ ''.split(',') }}{{ 'x\ny\r\nz\n'.splitlines() }}{{ 'a-b'.split('-')[-1] }}"),
    ("affix_methods", "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.startswith('') }}{{ 'prefix_x'.removeprefix('prefix_') }}{{ 'x.json'.removesuffix('.json') }}"),
    ("replace_case_methods", "{{ 'aXbX'.replace('X', '-') }}{{ 'aXbX'.replace('X', '-', 1) }}{{ 'hi'.upper() }}{{ 'HI'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'AbC'.swapcase() }}"),
    ("search_methods", "{{ 'abcabc'.find('c') }}{{ 'abc'.find('z') }}{{ 'abcabc'.rfind('a') }}{{ 'abcabc'.count('bc') }}{{ 'héllo'.find('l') }}{{ 'abc'.index('b') }}"),
    ("misc_methods", "{{ '-'.join(['a','b']) }}{{ 'ab'.center(6, '*') }}{{ '42'.zfill(5) }}{{ '-4'.zfill(4) }}{{ 'a1'.isalnum() }}{{ '12'.isdigit() }}{{ ' '.isspace() }}{{ 'key=value=x'.partition('=') }}{{ 'a.b.c'.rpartition('.') }}{{ 'ab'.ljust(4, '.') }}{{ 'ab'.rjust(4) }}{{ 'abc'.isalpha() }}{{ 'Ab'.islower() }}"),
    ("think_split", "{{ c.split('</think>')[-1].lstrip('\n') }}|{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}|{{ '</think>' in c }}"),
]

_UNDEFINED = [
    ("undefined_soft_uses", "{{ u }}[{{ u ~ 'x' }}]{{ u|length }}{{ u|list }}{{ u is defined }}{% for v in u %}never{% else %}empty{% endfor %}{{ u == u }}{{ u != none }}{{ 'a' in u }}{{ u|default('d') }}{{ (u or 'x') }}{{ u|string }}[{{ u|join }}]{{ u|lower }}{{ u|first is defined }}{{ not u }}"),
    ("undefined_in_collections", "{{ [u] }}{{ [u]|length }}{{ u is none }}{{ u|trim }}"),
]

# Each of these must fail on both sides.
_ERRORS = [
    ("err_attr_of_undefined", "{{ u.attr }}"),
    ("err_add_undefined", "{{ u + 1 }}"),
    ("err_index_undefined", "{{ u[0] }}"),
    ("err_call_undefined", "{{ u() }}"),
    ("err_int_undefined", "{{ u|int }}"),
    ("err_tojson_undefined", "{{ u|tojson }}"),
    ("err_compare_undefined", "{{ u < 1 }}"),
    ("err_deep_missing", "{{ d.missing.deeper }}"),
    ("err_neg_undefined", "{{ -u }}"),
    ("err_int_plus_str", "{{ 1 + 'a' }}"),
    ("err_str_plus_int", "{{ 'a' + 1 }}"),
    ("err_div_zero", "{{ 1 / 0 }}"),
    ("err_floordiv_zero", "{{ 1 // 0 }}"),
    ("err_mod_zero", "{{ 1 % 0 }}"),
    ("err_unorderable", "{{ [1] < 'a' }}"),
    ("err_in_int", "{{ 1 in 2 }}"),
    ("err_int_in_str", "{{ 1 in 'abc' }}"),
    ("err_list_append", "{{ xs.append(1) }}"),
    ("err_dict_update", "{{ d.update({}) }}"),
    ("err_range_too_big", "{{ range(200000)|length }}"),
    ("err_unpack_too_many", "{% for a, b in [[1,2,3]] %}{% endfor %}"),
    ("err_unpack_too_few", "{% for a, b in [[1]] %}{% endfor %}"),
    ("err_set_attr_undefined_ns", "{% set nsx.x = 1 %}"),
    ("err_set_attr_dict", "{% set dd = {} %}{% set dd.x = 1 %}"),
    ("err_macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
    ("err_macro_unknown_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(z=1) }}"),
    ("err_str_times_str", "{{ 'x' * 'y' }}"),
    ("err_none_plus_int", "{{ nothing + 1 }}"),
    ("err_dict_plus_dict", "{{ {'a':1} + {'b':2} }}"),
    ("err_items_of_list", "{{ xs|items|list }}"),
    ("err_length_of_none", "{{ nothing|length }}"),
    ("err_list_of_int", "{{ 5|list }}"),
    ("err_first_of_int", "{{ 5|first }}"),
    ("err_abs_extra_arg", "{{ 1|abs(2) }}"),
    ("err_iterate_int", "{% for i in 5 %}{% endfor %}"),
    ("err_call_string", "{{ 'abc'() }}"),
    ("err_sort_mixed", "{{ [1, 'a']|sort }}"),
    ("err_join_non_str", "{{ ','.join([1, 2]) }}"),
    ("err_empty_separator", "{{ 'abc'.split('') }}"),
    ("err_slice_step_zero", "{{ xs[::0] }}"),
    ("err_raise_exception", "{{ raise_exception('boom: ' ~ 42) }}"),
    ("err_raise_in_macro", "{% macro m(v) %}{% if v > 1 %}{{ raise_exception('too big: ' ~ v) }}{% endif %}{{ v }}{% endmacro %}{{ m(1) }}{{ m(2) }}"),
    ("err_raise_in_loop", "{% for m in users %}{% if m.age is not defined %}{{ raise_exception('user ' ~ m.name ~ ' has no age') }}{% endif %}{% endfor %}"),
    ("err_loop_cycle_empty", "{% for i in [1] %}{{ loop.cycle() }}{% endfor %}"),
    ("err_sum_strings", "{{ ['a', 'b']|sum }}"),
    ("err_tojson_namespace", "{{ namespace(a=1)|tojson }}"),
    ("err_map_without_filter", "{{ xs|map|list }}"),
]

# Each of these must fail to parse on both sides.
_SYNTAX_ERRORS = [
    ("syntax_unclosed_if", "{% if x %}"),
    ("syntax_for_missing_iterable", "{% for x in %}{% endfor %}"),
    ("syntax_unclosed_variable", "{{ x "),
    ("syntax_stray_endif", "{% endif %}"),
    ("syntax_unknown_filter", "{{ x | nosuchfilter }}"),
    ("syntax_unknown_test", "{{ x is nosuchtest }}"),
    ("syntax_do_tag", "{% do x %}"),
    ("syntax_unterminated_string", "{{ 'unterminated }}"),
    ("syntax_default_before_required", "{% macro m(a=1, b) %}{% endmacro %}"),
    ("syntax_unbalanced_paren", "{{ (1 }}"),
    ("syntax_wrong_bracket", "{{ [1) }}"),
    ("syntax_empty_expression", "{{ }}"),
    ("syntax_set_without_target", "{% set %}"),
    ("syntax_double_else", "{% if 1 %}{% else %}{% else %}{% endif %}"),
    ("syntax_stray_endfor", "{% endfor %}"),
    ("syntax_unknown_tag", "{% frobnicate %}"),
    ("syntax_unclosed_comment", "{# never closed"),
    ("syntax_bad_char", "{{ 1 @ 2 }}"),
    ("syntax_chained_is", "{{ x is defined is defined }}"),
    ("syntax_unclosed_for", "{% for x in xs %}{{ x }}"),
    ("syntax_assign_to_const", "{% set 1 = 2 %}"),
    ("syntax_trailing_operator", "{{ 1 + }}"),
    ("syntax_unclosed_raw", "{% raw %}abc"),
]


def feature_cases():
    cases = []
    groups = [_WHITESPACE, _LITERALS, _ACCESS, _FILTERS, _TESTS, _STATEMENTS, _METHODS, _UNDEFINED]
    for group in groups:
        for name, template in group:
            cases.append({"name": name, "template": template, "context": CONTEXT, "expect": "any"})
    for name, template in _ERRORS:
        cases.append({"name": name, "template": template, "context": CONTEXT, "expect": "error"})
    for name, template in _SYNTAX_ERRORS:
        cases.append({"name": name, "template": template, "context": CONTEXT, "expect": "syntax"})
    return cases
