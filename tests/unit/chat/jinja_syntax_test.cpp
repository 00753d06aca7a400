// Lexing and parsing: whitespace control exactly as jinja2 applies trim_blocks + lstrip_blocks, literals,
// operator precedence, and the statements chat templates use. Expected strings were checked against
// Python's jinja2 with Hugging Face's settings.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace spark {
namespace {

using test::render;

TEST(JinjaWhitespace, TrimBlocksRemovesOneNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(render("{% if true %}\n\nx{% endif %}"), "\nx");
  // Variables are not blocks: the newline after }} stays.
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}\n"), "a\nb");
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentationBeforeBlockAndCommentTags) {
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("  {# comment #}\nx"), "x");
  // Only whitespace between the line start and the tag is removed, never text.
  EXPECT_EQ(render("ab {% if true %}y{% endif %}"), "ab y");
  // Unicode whitespace counts, as in Python's \s.
  EXPECT_EQ(render("x\n\u3000 {% if true %}y{% endif %}"), "x\ny");
  // Print statements are not lstripped.
  EXPECT_EQ(render("line1\n    {{ 'v' }}\nline2"), "line1\n    v\nline2");
}

TEST(JinjaWhitespace, MinusStripsAndPlusDisables) {
  EXPECT_EQ(render("a  {%- if true %} b {% endif -%}  c"), "a b c");
  EXPECT_EQ(render("a   {{- ' v ' -}}   b"), "a v b");
  EXPECT_EQ(render("a\u3000{%- if true %}b{% endif %}"), "ab");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("x {% if true +%}\ny{% endif %}"), "x \ny");
  EXPECT_EQ(render("{%- set x = 1 -%}\n\n\n{{ x }}\n\n"), "1\n");
}

TEST(JinjaWhitespace, NewlinesAreNormalizedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(render("a\r\nb\r\n{% if true %}\r\nc{% endif %}\r\n"), "a\nb\nc");
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
}

TEST(JinjaSyntax, CommentsAndRawBlocks) {
  EXPECT_EQ(render("a{# {{ x }} {% if %} #}b"), "ab");
  EXPECT_EQ(render("{% raw %}{{ not parsed }} {% if %}{% endraw %}!"), "{{ not parsed }} {% if %}!");
  EXPECT_EQ(render("{ not a tag } {{ '{' }} }}"), "{ not a tag } { }}");
}

TEST(JinjaSyntax, StringLiteralsUsePythonEscapes) {
  EXPECT_EQ(render(R"({{ 'a\'b' }}|{{ "q\"q" }}|{{ 'tab\there' }}|{{ '\u00e9\x41\101' }}|{{ 'a' 'b' }})"),
            "a'b|q\"q|tab\there|\u00e9AA|ab");
  // Unknown escapes keep their backslash, as in Python.
  EXPECT_EQ(render(R"({{ 'x\qy' }})"), "x\\qy");
}

TEST(JinjaSyntax, NumberLiterals) {
  EXPECT_EQ(
      render("{{ 1_000 }} {{ 0x1f }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1e-5 }} {{ 12.0 }} {{ 1e16 }}"),
      "1000 31 15 5 1500.0 1e-05 12.0 1e+16");
}

TEST(JinjaSyntax, OperatorPrecedenceFollowsJinja) {
  // Unary minus binds tighter than **, and ** is left-associative in jinja2.
  EXPECT_EQ(render("{{ -2 ** 2 }} {{ 2 ** 3 ** 2 }}"), "4 64");
  // ~ binds tighter than + and -, filters bind to the nearest operand, tests bind tighter than `not`.
  EXPECT_EQ(render("{{ 'n=' ~ 2 * 3 }}|{{ 'a' ~ 'b'|upper }}|{{ -3|abs }}|{{ not none is none }}"),
            "n=6|aB|3|False");
  EXPECT_EQ(render("{{ 1 if none else 2 if true else 3 }}{{ 'y' if false }}."), "2.");
}

TEST(JinjaSyntax, TestArgumentsWithoutParentheses) {
  EXPECT_EQ(render("{{ 9 is divisibleby 3 }} {{ 'a' is in 'cat' }} {{ 1 is eq 2 }}"), "True True False");
}

TEST(JinjaSyntax, StatementsChatTemplatesUse) {
  EXPECT_EQ(
      render("{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}/{{ loop.length }}={{ x }} {% endfor %}"),
      "1/2=2 2/2=3 ");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1b2");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a + b }}"), "3");
  EXPECT_EQ(render("{% set x %} hi {% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}"),
            "[ hi ]ABC");
  EXPECT_EQ(render("{% filter upper %}hello {{ 'world' }}{% endfilter %}"), "HELLO WORLD");
  EXPECT_EQ(render("{% with a = 1 %}{{ a }}{% endwith %}[{{ a is defined }}]"), "1[False]");
  EXPECT_EQ(render("{% generation %}x{% endgeneration %}y"), "xy");
  EXPECT_EQ(render("{% print 1 + 1 %}"), "2");
}

TEST(JinjaSyntax, LoopControls) {
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                   "{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "01345");
}

TEST(JinjaSyntax, MacrosAndCallBlocks) {
  EXPECT_EQ(render("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', greeting='Hi') }}"),
            "Hello, A! Hi, B!");
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, x=3) }}"),
            "1(2,){'x': 3}");
  EXPECT_EQ(
      render("{% macro box(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call box('t') %}in{% endcall %}"),
      "[t:in]");
}

TEST(JinjaSyntax, ErrorsNameTheLine) {
  auto e = test::render_error("line one\n{% if x %}\nno end");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kSyntax);
  EXPECT_EQ(e->line(), 3);
  EXPECT_NE(std::string(e->what()).find("(line 3)"), std::string::npos) << e->what();
  EXPECT_NE(e->detail().find("'endif'"), std::string::npos) << e->detail();

  e = test::render_error("{{ x }}\n\n{{ x | nosuchfilter }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line(), 3);
  EXPECT_EQ(e->detail(), "No filter named 'nosuchfilter'.");
}

TEST(JinjaSyntax, MalformedTemplatesAreSyntaxErrors) {
  for (const char* source :
       {"{{ x ", "{% endif %}", "{{ (1 }}", "{{ [1) }}", "{{ }}", "{% set %}", "{# never closed",
        "{{ 1 @ 2 }}", "{% macro m(a=1, b) %}{% endmacro %}", "{% break %}", "{% include 'x' %}",
        "{% for x in xs recursive %}", "{% do x %}", "{{ 'unterminated }}",
        "{% if 1 %}{% else %}{% else %}{% endif %}", "{{ x is a is b }}"}) {
    auto e = test::render_error(source);
    ASSERT_TRUE(e) << source;
    EXPECT_EQ(e->kind(), TemplateError::Kind::kSyntax) << source << ": " << e->what();
    EXPECT_EQ(std::string(e->what()).find('\n'), std::string::npos) << source;
  }
}

TEST(JinjaSyntax, UnknownFilterInsideIfFailsOnlyWhenReached) {
  // jinja2 defers the check inside {% if %} and inline ifs, but not inside loops.
  EXPECT_EQ(render("{% if false %}{{ 1|nosuch }}{% endif %}ok"), "ok");
  EXPECT_EQ(render("{{ 1|nosuch if false }}ok"), "ok");
  auto e = test::render_error("{% if true %}{{ 1|nosuch }}{% endif %}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kRuntime);
  EXPECT_EQ(e->detail(), "No filter named 'nosuch' found.");
  e = test::render_error("{% if false %}{% for x in [] %}{{ x|nosuch }}{% endfor %}{% endif %}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kSyntax);
}

TEST(JinjaSyntax, DeepNestingIsAnErrorNotACrash) {
  std::string deep(5000, '(');
  auto e = test::render_error("{{ " + deep + "1" + std::string(5000, ')') + " }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kSyntax);
  e = test::render_error("{{ " + std::string(5000, '-') + "1 }}");
  ASSERT_TRUE(e);
  e = test::render_error("{{ " + std::string(5000, '[') + " }}");
  ASSERT_TRUE(e);
}

TEST(JinjaSyntax, RejectsInvalidUtf8) {
  auto e = test::render_error(std::string("ok \xff\xfe {{ 1 }}"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kSyntax);
}

}  // namespace
}  // namespace spark
