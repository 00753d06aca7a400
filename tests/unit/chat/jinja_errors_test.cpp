// Failures are spark::TemplateErrors with one-line messages naming the template line; runaway templates hit
// the output, recursion and step limits instead of crashing or hanging.
#include <gtest/gtest.h>

#include <random>

#include "jinja_test_util.h"

namespace spark {
namespace {

using test::render;
using test::render_error;

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  auto e =
      render_error("{% if not messages %}\n  {{- raise_exception('No messages provided.') }}\n{% endif %}",
                   R"({"messages": []})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kRaised);
  EXPECT_EQ(e->detail(), "No messages provided.");
  EXPECT_EQ(e->line(), 2);
  EXPECT_STREQ(e->what(), "chat template error (line 2): No messages provided.");
  // It is also a spark::Error, which the server maps to HTTP 400.
  try {
    render("{{ raise_exception('boom') }}");
    FAIL();
  } catch (const Error& err) {
    EXPECT_STREQ(err.what(), "chat template error (line 1): boom");
  }
}

TEST(JinjaErrors, MessagesAreOneLine) {
  auto e = render_error("{{ raise_exception('multi\nline\r\nmessage') }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "multi line message");  // \r\n in the source is normalized first
  EXPECT_EQ(std::string(e->what()).find('\n'), std::string::npos);
}

TEST(JinjaErrors, RuntimeErrorsNameTheLineOfTheFailingExpression) {
  auto e = render_error("a\nb\n{{ 1 + 'x' }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kRuntime);
  EXPECT_EQ(e->line(), 3);
  EXPECT_EQ(e->detail(), "unsupported operand type(s) for +: 'int' and 'str'");
  e = render_error("{% macro m(x) %}\n{{ x.y.z }}\n{% endmacro %}\n{{ m({}) }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line(), 2);
  EXPECT_EQ(e->detail(), "'dict object' has no attribute 'y'");
}

TEST(JinjaErrors, TypeErrorsMatchPythonsWording) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str"},
      {"{{ 1 / 0 }}", "division by zero"},
      {"{{ [1] < 'a' }}", "'<' not supported between instances of 'list' and 'str'"},
      {"{{ 1 in 2 }}", "argument of type 'int' is not iterable"},
      {"{% for a, b in [[1, 2, 3]] %}{% endfor %}", "too many values to unpack (expected 2)"},
      {"{% set d = {} %}{% set d.x = 1 %}", "cannot assign attribute on non-namespace object"},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "macro 'm' takes not more than 1 argument(s)"},
      {"{% macro m(a) %}{% endmacro %}{{ m(z=1) }}", "macro 'm' takes no keyword argument 'z'"},
      {"{{ 'abc'() }}", "'str' object is not callable"},
      {"{{ {'a': 1}[1:] }}", "unhashable type: 'slice'"},
      {"{{ range(200000)|length }}",
       "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
  };
  for (const auto& [source, message] : cases) {
    auto e = render_error(source);
    ASSERT_TRUE(e) << source;
    EXPECT_EQ(e->detail(), message) << source;
  }
}

TEST(JinjaErrors, UnsupportedFeaturesFailClearly) {
  auto e = render_error("{{ '%s' % 1 }}");
  ASSERT_TRUE(e);
  EXPECT_NE(e->detail().find("not supported"), std::string::npos) << e->detail();
  e = render_error("{{ 'x'|urlize }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "filter 'urlize' is not supported in chat templates");
  e = render_error("{{ 'a{}'.format(1) }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "str.format() is not supported in chat templates");
  e = render_error("{{ 2 ** 70 }}");
  ASSERT_TRUE(e);
  EXPECT_NE(e->detail().find("64 bits"), std::string::npos) << e->detail();
}

TEST(JinjaLimits, RecursionDepth) {
  auto e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit);
  EXPECT_NE(e->detail().find("recursion"), std::string::npos) << e->detail();
  ChatTemplateLimits limits;
  limits.max_call_depth = 10;
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ f(9) }}",
                   "{}", limits),
            "0123456789");
  e = render_error("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(10) }}", "{}",
                   limits);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit);
}

TEST(JinjaLimits, OutputSize) {
  ChatTemplateLimits limits;
  limits.max_output_bytes = 1000;
  EXPECT_EQ(render("{{ 'x' * 1000 }}", "{}", limits).size(), 1000u);
  EXPECT_EQ(render("{{ ('<' * 250)|escape|length }}", "{}", limits), "1000");
  EXPECT_EQ(render("{{ ('\\n' * 199)|indent('xxxx', blank=true)|length }}", "{}", limits), "995");
  // A JSON string escapes control characters 6x: 166 of them and the quotes are 998 bytes, 167 are 1,004.
  EXPECT_EQ(render("{{ c|tojson|length }}", R"({"c": ")" + std::string(166 * 6, 'x') + R"("})", limits),
            "998");
  auto controls = [](int n) {
    std::string c;
    for (int i = 0; i < n; ++i) c += "\\u0001";
    return R"({"c": ")" + c + R"("})";
  };
  EXPECT_EQ(render("{{ c|tojson|length }}", controls(166), limits), "998");
  auto je = render_error("{{ c|tojson|length }}", controls(167), limits);
  ASSERT_TRUE(je);
  EXPECT_EQ(je->kind(), TemplateError::Kind::kLimit);
  // replace is checked piece by piece, exactly at the limit, with or without an empty search string.
  EXPECT_EQ(render("{{ ('a' * 500).replace('a', 'bb') }}", "{}", limits), std::string(1000, 'b'));
  EXPECT_EQ(render("{{ ('a' * 499)|replace('', 'b')|length }}", "{}", limits), "999");
  EXPECT_EQ(render("{{ ('ab' * 499).replace('b', '', 2)|length }}", "{}", limits), "996");
  // join's separators count towards the limit: exactly at it passes, one more separator (below) fails.
  EXPECT_EQ(render("{{ ['', '', '']|join('x' * 500)|length }}", "{}", limits), "1000");
  for (const char* source :
       {"{{ 'x' * 1001 }}", "{% for i in range(2000) %}x{% endfor %}", "{{ [1] * 5000 }}",
        "{{ 'x' * 600 ~ 'y' * 600 }}", "{% macro m() %}{{ 'x' * 700 }}{% endmacro %}{{ m() ~ m() }}",
        "{{ [1, 2]|tojson(indent=2000) }}", "{{ 'ab'|center(5000) }}",
        // Values turned into text inside a filter or test count against the render's limit too.
        "{% set s = 'x' * 600 %}{{ [s, s]|string|length }}",
        "{% set s = 'x' * 600 %}{{ [s, s]|join|length }}", "{% set s = 'x' * 600 %}{{ [s, s]|upper|length }}",
        "{% set s = 'x' * 600 %}{{ [s, s] is lower }}",
        "{% set s = 'x' * 600 %}{{ raise_exception([s, s]) }}", "{{ ('a' * 501).replace('a', 'bb')|length }}",
        "{{ ('a' * 500).replace('', 'b')|length }}", "{{ ('a' * 500)|replace('', 'b')|length }}",
        "{% set s = 'x' * 600 %}{{ [s, s]|tojson|length }}",
        // escape grows 5x an entity and had no check at all; indent grows by its width a line.
        "{{ ('<' * 251)|escape|length }}", "{{ ('\\n' * 200)|indent('xxxxx', blank=true)|length }}",
        "{{ ['', '', '', '']|join('x' * 334)|length }}"}) {
    auto e = render_error(source, "{}", limits);
    ASSERT_TRUE(e) << source;
    EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit) << source << ": " << e->what();
  }
  // The default limit stops a template that would otherwise need terabytes.
  auto e = render_error("{{ 'x' * 1000000000000 }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit);
  // ... before the value exists: each of these built gigabytes first (a helper's reproducers), a replace
  // of 10 GB, a batch padded to 2e9 values, and a 20 MB string shared 60 times, printed or serialized.
  for (const char* source :
       {"{{ ('a' * 100000).replace('a', 'a' * 100000) }}", "{{ ('a' * 100000)|replace('a', 'a' * 100000) }}",
        "{{ [1]|batch(2000000000, 'x')|list|length }}",
        "{% set big = ['a' * 20000000] * 60 %}{{ big|tojson|length }}",
        "{% set big = ['a' * 20000000] * 60 %}{{ big|string|length }}",
        "{% set big = ['a' * 20000000] * 60 %}{{ big }}",
        "{% set big = ['a' * 20000000] * 60 %}{{ 'x' ~ big }}",
        "{{ ([['a'] * 3000000] * 60)|sum(start=[])|length }}",
        "{{ ('\\n' * 1000000)|indent('x' * 60000, blank=true)|length }}",
        "{{ ('<' * 20000000)|escape|length }}"}) {
    e = render_error(source);
    ASSERT_TRUE(e) << source;
    EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit) << source << ": " << e->what();
  }
}

// A value named in an error message is cut at 1 KiB: a missing 60 MB key built a 60 MB message (up to the
// 256 MiB print bound) even when the undefined value was only tested.
TEST(JinjaErrors, LargeValuesInMessagesAreCut) {
  EXPECT_EQ(render("{% set s = 'x' * 100000 %}{{ ({}[[s, s]]) is defined }}"), "False");
  auto e = render_error("{% set s = 'x' * 100000 %}{{ [1].index([s]) }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "['" + std::string(1022, 'x') + "... is not in list");
  e = render_error("{{ [1].index('two') }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "'two' is not in list");
  e = render_error("{% set s = 'x' * 100000 %}{{ ({}[[s, s]]).upper() }}");
  ASSERT_TRUE(e);
  EXPECT_LT(e->detail().size(), 1200u) << e->detail().substr(0, 200);
  // A string key is looked up as an attribute: its name is cut too.
  EXPECT_EQ(render("{% set s = 'x' * 100000 %}{{ ({}[s]) is defined }}"), "False");
  e = render_error("{% set s = 'x' * 100000 %}{{ ({}[s]).upper() }}");
  ASSERT_TRUE(e);
  EXPECT_LT(e->detail().size(), 1200u) << e->detail().substr(0, 200);
  // The cut does not split a UTF-8 character: 1,022 bytes after "['" are 340 three-byte characters and two
  // bytes of the next.
  std::string euros;
  for (int i = 0; i < 340; ++i) euros += "\u20ac";
  e = render_error("{{ [1].index(['\u20ac' * 1000]) }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "['" + euros + "... is not in list");
}

TEST(JinjaLimits, StepBudgetStopsRunawayLoops) {
  ChatTemplateLimits limits;
  limits.max_steps = 10000;
  auto e = render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                        "{}", limits);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit);
  EXPECT_NE(e->detail().find("steps"), std::string::npos);
  // Work inside filters counts too, so a filter over a big list inside a big loop cannot run for minutes.
  e = render_error("{% for i in range(100000) %}{% set x = range(1000)|sum %}{% endfor %}", "{}", limits);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit);
  e = render_error("{% set xs = range(5000)|list %}{% for i in xs %}{% if i in xs %}{% endif %}{% endfor %}",
                   "{}", limits);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit);
}

// Found by the chat_template fuzzer (session 13): a namespace that holds itself overflowed the stack when
// printed. Cycles can only go through namespaces (lists and dicts cannot change), so printing counts levels.
TEST(JinjaLimits, NamespaceHoldingItselfIsAnErrorNotACrash) {
  for (const char* source :
       {"{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns }}",
        "{% set ns = namespace(n=0) %}{% set ns.n = [ns, {'a': ns}] %}{{ ns.n }}",
        "{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}{{ a ~ '' }}",
        "{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ [ns]|string }}"}) {
    auto e = render_error(source);
    ASSERT_TRUE(e) << source;
    EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit) << source << ": " << e->what();
    EXPECT_NE(e->detail().find("nested"), std::string::npos) << e->detail();
  }
  // Such a namespace is still usable where nothing walks into it.
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns.n.n.n is sameas ns }}"), "True");
}

// Lists and dicts built in a loop nest without bound unless capped: printing, comparing, tojson and even
// destroying such a value recurse once per level. Before the cap the first template below (a million
// levels) crashed spark-chat-render with SIGSEGV on destruction, in the Release build, and so did the
// generator chain below.
TEST(JinjaLimits, NestingDepthIsCapped) {
  for (const char* source : {
           "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% for j in range(10) %}"
           "{% set ns.x = [ns.x] %}{% endfor %}{% endfor %}{{ ns.x|length }}",
           "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} %}{% endfor "
           "%}",
           "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = (ns.x, 2) %}{% endfor %}",
           "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x]|list %}{% endfor "
           "%}",
           // Generators and loop objects hold values too: chains of them crashed the same way.
           "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% for j in range(10) %}"
           "{% set ns.x = [ns.x]|select %}{% endfor %}{% endfor %}ok",
           "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% for j in range(10) %}"
           "{% for _ in [ns.x] %}{% set ns.x = loop %}{% endfor %}{% endfor %}{% endfor %}ok",
       }) {
    auto e = render_error(source);
    ASSERT_TRUE(e) << source;
    EXPECT_EQ(e->kind(), TemplateError::Kind::kLimit) << source << ": " << e->what();
    EXPECT_NE(e->detail().find("nested more than 1000 levels"), std::string::npos) << e->detail();
  }
  // Up to the cap everything works: build, print, compare, serialize.
  const std::string deep =
      "{% set ns = namespace(x=[], y=[]) %}{% for i in range(999) %}{% set ns.x = [ns.x] %}"
      "{% set ns.y = [ns.y] %}{% endfor %}";
  EXPECT_EQ(render(deep + "{{ (ns.x|string)|length }} {{ ns.x == ns.y }} {{ (ns.x|tojson)|length }}"),
            "2000 True 2000");
  EXPECT_TRUE(render_error(deep + "{{ [ns.x] }}"));
}

// Blocks and chains nest one tree level per block or link, and parsing, checking, rendering and destroying
// the tree recurse once per level: before the cap a 480 KB template of nested ifs, and 1 MB chains such as
// a.a.a... or 1 + 1 + ..., crashed spark-chat-render with SIGSEGV. Now each is a syntax error.
TEST(JinjaLimits, NestedBlocksAndLongChainsAreCapped) {
  const auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const auto chain = [&](const std::string& head, const std::string& link, int n) {
    return "{{ " + head + repeat(link, n) + " }}";
  };
  const auto nested = [&](const std::string& open, const std::string& close, int n) {
    return repeat(open, n) + "x" + repeat(close, n);
  };
  const int n = 100000;
  const std::vector<std::string> cases = {
      nested("{% if true %}", "{% endif %}", n),
      nested("{% for a in [1] %}", "{% endfor %}", n),
      "{% macro m() %}{{ caller() }}{% endmacro %}" + nested("{% call m() %}", "{% endcall %}", n),
      nested("{% filter upper %}", "{% endfilter %}", n),
      chain("messages", ".a", n),
      chain("messages", "[0]", n),
      chain("range", "(1)", n),
      chain("1", "|string", n),
      chain("1", " + 1", n),
      chain("1", " * 1", n),
      chain("1", " ** 1", n),
      chain("1", " and 1", n),
      chain("1", " or 1", n),
      chain("1", " if 1", n),
  };
  for (const std::string& source : cases) {
    auto e = render_error(source);
    ASSERT_TRUE(e) << source.substr(0, 40);
    EXPECT_EQ(e->kind(), TemplateError::Kind::kSyntax) << source.substr(0, 40) << ": " << e->what();
    EXPECT_NE(e->detail().find("nested too deeply"), std::string::npos) << source.substr(0, 40);
  }
  // Chains of different kinds wrap each other, and a chain inside brackets is one operand of the next: the
  // bound is on the height of the tree, not on any one chain's length.
  std::string mixed = "x";
  for (const char* link : {".a", "[0]", "|string", " ** 1", " * 1", " + 1", " and 1", " or 1"})
    mixed += repeat(link, 150);
  std::string bracketed = "1";
  for (int i = 0; i < 60; ++i) bracketed = "(" + bracketed + repeat(" + 1", 150) + ")";
  for (const std::string& source : {"{{ " + mixed + " }}", "{{ " + bracketed + " }}"}) {
    auto e = render_error(source);
    ASSERT_TRUE(e) << source.substr(0, 40);
    EXPECT_EQ(e->detail(), "expression nested too deeply");
  }
  EXPECT_EQ(render(R"({{ messages[0][0][0].content|string|upper|lower ~ 'x' ~ 'y' + 'z' }})",
                   R"({"messages": [[[{"content": "c"}]]]})"),
            "cxyz");
  // Blocks count as levels of their own (a filter block holds no expression to count).
  auto e = render_error(nested("{% filter upper %}", "{% endfilter %}", 201));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->detail(), "blocks nested too deeply");
  // Far deeper than any real template still renders.
  EXPECT_EQ(render(nested("{% filter upper %}", "{% endfilter %}", 200)), "X");
  EXPECT_EQ(render(nested("{% if true %}", "{% endif %}", 60)), "x");
  EXPECT_EQ(render(nested("{% for a in [1] %}", "{% endfor %}", 60)), "x");
  EXPECT_EQ(render(chain("1", " + 1", 60)), "61");
  EXPECT_EQ(render(chain("'ab'", "|upper|lower", 30)), "ab");
  EXPECT_EQ(render(R"({{ {"a": {"a": {"a": [[1, 2]]}}}.a.a.a[0][1] }})"), "2");
}

TEST(JinjaRobustness, GarbageNeverCrashes) {
  // Random template text and random JSON contexts: every outcome is output or a TemplateError.
  std::mt19937 rng(1234);
  const std::string alphabet = "{}%#-+ \n\tabcxyz0123'\"()[]|.,:=<>!~*/loopifsetforendmacronsdefined";
  ChatTemplateLimits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_steps = 100000;
  for (int i = 0; i < 3000; ++i) {
    std::string source;
    const int len = static_cast<int>(rng() % 60);
    for (int k = 0; k < len; ++k) source += alphabet[rng() % alphabet.size()];
    if (i % 3 == 0) source = "{{ " + source + " }}";
    if (i % 3 == 1) source = "{% " + source + " %}";
    try {
      render(source, R"({"x": [1, {"a": "b"}], "s": "str", "n": null})", limits);
    } catch (const TemplateError&) {
    }
  }
}

}  // namespace
}  // namespace spark
