"""Random templates for the parity test: typed expressions and statements built from a small grammar, with
random whitespace control, so the C++ engine is compared with jinja2 far beyond the hand-written cases.

Generation is biased toward well-typed expressions (so most templates render and their text is compared),
but type errors and undefined values are generated too and must fail on both sides. Constructs the engine
deliberately does not support are never generated: printf-style `str % x`, non-string dict keys, and
integers beyond 64 bits (exponents and repetition counts stay small).
"""

import random

STRINGS = ["", "a", "abc", "Hello World", "  padded  ", "ünï", "日本語", "x,y,,z", "a-b_c d", "\u3000x\u3000",
           "it's", 'say "hi"', "line1\nline2", "TAB\there", "😀!", "MiXeD cAsE", "</think>tail", "a.b.c"]
SMALL_INTS = [0, 1, 2, 3, -1, -2, 5, 7, 10, 42, -7, 100]
FLOATS = ["0.5", "1.0", "2.5", "-1.5", "3.14159", "1e-3", "0.1", "100.0", "1e16", "2.5e-7"]


def quote(s):
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


class TemplateFuzzer:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.loop_vars = []  # names bound by enclosing for loops
        self.set_vars = []

    def chance(self, p):
        return self.rng.random() < p

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    # ---- expressions by type ----------------------------------------------------------------------------
    def int_expr(self, depth):
        if depth <= 0 or self.chance(0.3):
            return self.pick([str(self.pick(SMALL_INTS)), "nums[0]", "nums|length", "zero",
                              "(loop.index if loop is defined else 1)"])
        choice = self.rng.randrange(10)
        if choice == 0:
            return "(%s %s %s)" % (self.int_expr(depth - 1), self.pick(["+", "-", "*"]), self.int_expr(depth - 1))
        if choice == 1:
            return "(%s %s %s)" % (self.int_expr(depth - 1), self.pick(["//", "%"]), self.pick(["2", "3", "-4", "7"]))
        if choice == 2:
            return "%s|length" % self.pick([self.list_expr(depth - 1), self.str_expr(depth - 1)])
        if choice == 3:
            return "%s.find(%s)" % (self.str_expr(depth - 1), quote(self.pick(["a", "b", " ", "z", ""])))
        if choice == 4:
            return "(%s if %s else %s)" % (self.int_expr(depth - 1), self.bool_expr(depth - 1), self.int_expr(depth - 1))
        if choice == 5:
            return "%s|int" % self.pick([self.str_expr(depth - 1), self.float_expr(depth - 1), "'12'", "' 7 '"])
        if choice == 6:
            return "%s|abs" % self.int_expr(depth - 1)
        if choice == 7:
            return "(%s ** %s)" % (self.pick(["2", "-3", "10"]), self.pick(["0", "1", "2", "3"]))
        if choice == 8:
            return "[%s, %s]|%s" % (self.int_expr(depth - 1), self.int_expr(depth - 1), self.pick(["sum", "min", "max"]))
        return "%s.count(%s)" % (self.str_expr(depth - 1), quote(self.pick(["a", "l", ""])))

    def float_expr(self, depth):
        if depth <= 0 or self.chance(0.4):
            return self.pick(FLOATS + ["f"])
        choice = self.rng.randrange(5)
        if choice == 0:
            return "(%s / %s)" % (self.int_expr(depth - 1), self.pick(["2", "3", "4", "-8", "7"]))
        if choice == 1:
            return "(%s %s %s)" % (self.float_expr(depth - 1), self.pick(["+", "-", "*"]), self.float_expr(depth - 1))
        if choice == 2:
            return "%s|round(%s)" % (self.float_expr(depth - 1), self.pick(["0", "1", "2"]))
        if choice == 3:
            return "%s|float" % self.pick(["'2.5'", "'x'", "'1e3'", self.int_expr(depth - 1)])
        return "(%s // %s)" % (self.float_expr(depth - 1), self.pick(["0.5", "2", "-3.0"]))

    def str_expr(self, depth):
        if depth <= 0 or self.chance(0.25):
            return self.pick([quote(self.pick(STRINGS)), "text", "x", "c"] + self.set_vars_of("s"))
        choice = self.rng.randrange(16)
        if choice == 0:
            return "(%s ~ %s)" % (self.str_expr(depth - 1), self.any_expr(depth - 1))
        if choice == 1:
            return "(%s + %s)" % (self.str_expr(depth - 1), self.str_expr(depth - 1))
        if choice == 2:
            return "%s|%s" % (self.str_expr(depth - 1), self.pick(["upper", "lower", "trim", "title", "capitalize",
                                                                     "reverse", "string"]))
        if choice == 3:
            return "%s.%s()" % (self.str_expr(depth - 1), self.pick(["strip", "lstrip", "rstrip", "upper", "lower",
                                                                       "title", "capitalize", "swapcase"]))
        if choice == 4:
            return "%s.split(%s)[%s]" % (self.str_expr(depth - 1), self.pick(["", "','", "' '", "'-'", "'</think>'"]),
                                          self.pick(["0", "-1", "1"]))
        if choice == 5:
            return "%s|replace(%s, %s)" % (self.str_expr(depth - 1), quote(self.pick(["a", " ", "l", ""])),
                                           quote(self.pick(["_", "", "XY"])))
        if choice == 6:
            return "%s[%s]" % (self.str_expr(depth - 1), self.pick(["1:", ":2", "::-1", "-3:", "1:-1", "::2", "0"]))
        if choice == 7:
            return "%s|join(%s)" % (self.list_expr(depth - 1), quote(self.pick([", ", "", "-"])))
        if choice == 8:
            return "%s|tojson" % self.any_expr(depth - 1)
        if choice == 9:
            return "(%s * %s)" % (self.str_expr(depth - 1), self.pick(["0", "1", "2", "3"]))
        if choice == 10:
            return "%s|default(%s)" % (self.pick(["u", "d.missing", "nothing", "x"]), self.str_expr(depth - 1))
        if choice == 11:
            return "%s.strip(%s)" % (self.str_expr(depth - 1), quote(self.pick(["a", " x", "\u3000", "!"])))
        if choice == 12:
            return "(%s if %s else %s)" % (self.str_expr(depth - 1), self.bool_expr(depth - 1), self.str_expr(depth - 1))
        if choice == 13:
            return "%s|string" % self.any_expr(depth - 1)
        if choice == 14:
            return "d.get(%s, %s)" % (quote(self.pick(["a", "b", "zz"])), self.str_expr(depth - 1))
        return "%s|%s(%s)" % (self.any_expr(depth - 1), "tojson", self.pick(["indent=2", "sort_keys=true",
                                                                               "separators=(',', ':')"]))

    def list_expr(self, depth):
        if depth <= 0 or self.chance(0.25):
            return self.pick(["xs", "nums", "empty", "users", "[1, 2, 3]", "['b', 'a', 'C']", "[]", "(1, 'two')"]
                             + self.set_vars_of("l"))
        choice = self.rng.randrange(12)
        if choice == 0:
            return "(%s + %s)" % (self.list_expr(depth - 1), self.list_expr(depth - 1))
        if choice == 1:
            return "%s|%s|list" % (self.list_expr(depth - 1), self.pick(["reverse", "unique", "select", "reject"]))
        if choice == 2:
            return "%s|sort" % self.pick(["nums", "['b', 'a', 'C']", "[3.5, 1, 2]", self.list_expr(depth - 1)])
        if choice == 3:
            return "%s.split(%s)" % (self.str_expr(depth - 1), self.pick(["", "','", "' '"]))
        if choice == 4:
            return "%s[%s]" % (self.list_expr(depth - 1), self.pick(["1:", ":2", "::-1", "-2:", "::2"]))
        if choice == 5:
            return "range(%s)|list" % self.pick(["3", "0", "1, 4", "5, 0, -2"])
        if choice == 6:
            return "users|%s('%s')|list" % (self.pick(["selectattr", "rejectattr"]), self.pick(["admin", "age", "name"]))
        if choice == 7:
            return "users|map(attribute='%s')|list" % self.pick(["name", "age", "admin"])
        if choice == 8:
            return "[%s, %s]" % (self.any_expr(depth - 1), self.any_expr(depth - 1))
        if choice == 9:
            return "%s|list" % self.pick(["d", "d.items()", "d.values()", "'ab'", self.str_expr(depth - 1)])
        if choice == 10:
            return "(%s * %s)" % (self.list_expr(depth - 1), self.pick(["0", "2"]))
        return "%s|batch(2)|list" % self.list_expr(depth - 1)

    def dict_expr(self, depth):
        if depth <= 0 or self.chance(0.4):
            return self.pick(["d", "users[0]", "schema", "{}"])
        choice = self.rng.randrange(3)
        if choice == 0:
            return "{%s: %s, %s: %s}" % (quote(self.pick(["a", "k", "é"])), self.any_expr(depth - 1),
                                         quote(self.pick(["b", "z"])), self.any_expr(depth - 1))
        if choice == 1:
            return "dict(%s=%s)" % (self.pick(["a", "b"]), self.any_expr(depth - 1))
        return "users[%s]" % self.pick(["0", "1", "-1", "2"])

    def bool_expr(self, depth):
        if depth <= 0 or self.chance(0.2):
            return self.pick(["true", "false", "flag", "not flag", "x is defined", "u is defined"])
        choice = self.rng.randrange(9)
        if choice == 0:
            return "%s %s %s" % (self.int_expr(depth - 1), self.pick(["==", "!=", "<", "<=", ">", ">="]), self.int_expr(depth - 1))
        if choice == 1:
            return "%s %s %s" % (self.str_expr(depth - 1), self.pick(["==", "!=", "<", ">"]), self.str_expr(depth - 1))
        if choice == 2:
            return "%s %s %s" % (self.str_expr(depth - 1), self.pick(["in", "not in"]), self.str_expr(depth - 1))
        if choice == 3:
            return "%s %s %s" % (self.any_expr(depth - 1), self.pick(["in", "not in"]), self.list_expr(depth - 1))
        if choice == 4:
            return "%s is %s%s" % (self.any_expr(depth - 1), self.pick(["", "not "]),
                                   self.pick(["defined", "undefined", "none", "string", "number", "mapping", "iterable",
                                              "sequence", "integer", "float", "boolean", "true", "false"]))
        if choice == 5:
            return "(%s %s %s)" % (self.bool_expr(depth - 1), self.pick(["and", "or"]), self.any_expr(depth - 1))
        if choice == 6:
            return "not %s" % self.any_expr(depth - 1)
        if choice == 7:
            return "%s.%s(%s)" % (self.str_expr(depth - 1), self.pick(["startswith", "endswith"]),
                                  quote(self.pick(["a", "", "H", "!"])))
        return "%s is %s" % (self.int_expr(depth - 1), self.pick(["odd", "even", "divisibleby 3"]))

    def any_expr(self, depth):
        options = [self.int_expr, self.float_expr, self.str_expr, self.list_expr, self.dict_expr, self.bool_expr]
        if self.chance(0.08):
            return self.pick(["u", "d.missing", "nothing", "xs[10]", "none", "d.b", "users[2].age"] + self.loop_vars)
        return self.pick(options)(depth)

    def set_vars_of(self, kind):
        return [name for name in self.set_vars if name.startswith(kind + "_")]

    # ---- statements and whitespace ----------------------------------------------------------------------
    def ws(self):
        return self.pick(["", "", " ", "\n", "  ", "\n  ", "\t", "\n\n", " \n", "\u3000", "\n    "])

    def open(self, kind):
        return "{" + kind + self.pick(["", "", "", "-", "+" if kind == "%" else ""]) + " "

    def close(self, kind):
        end = "}}" if kind == "{" else "%}"
        return " " + self.pick(["", "", "", "-", "+" if kind == "%" else ""]) + end

    def tag(self, body):
        return self.open("%") + body + self.close("%")

    def output(self, expr):
        return self.open("{") + expr + self.close("{")

    def block(self, depth):
        parts = []
        for _ in range(self.rng.randint(1, 3)):
            parts.append(self.ws() + self.statement(depth))
        return "".join(parts) + self.ws()

    def statement(self, depth):
        choice = self.rng.randrange(9) if depth > 0 else 0
        if choice <= 2:
            return self.pick(["", "txt ", "Δ", "line\n"]) + self.output(self.any_expr(2))
        if choice == 3:
            body = self.tag("if " + self.bool_expr(2)) + self.block(depth - 1)
            if self.chance(0.4):
                body += self.tag("elif " + self.bool_expr(2)) + self.block(depth - 1)
            if self.chance(0.5):
                body += self.tag("else") + self.block(depth - 1)
            return body + self.tag("endif")
        if choice == 4:
            var = self.pick(["item", "v"])
            header = "for %s in %s" % (var, self.list_expr(2))
            if self.chance(0.2):
                header += " if %s is not none" % var
            self.loop_vars.append(var)
            body = self.output(self.pick([var, "loop.index", "loop.first", "loop.last", "loop.revindex",
                                          "loop.length", "loop.previtem", "loop.nextitem"]))
            body += self.block(depth - 1)
            self.loop_vars.pop()
            if self.chance(0.2):
                body += self.tag("if loop.index > 1") + self.tag(self.pick(["break", "continue"])) + self.tag("endif")
            out = self.tag(header) + body
            if self.chance(0.3):
                out += self.tag("else") + self.block(depth - 1)
            return out + self.tag("endfor")
        if choice == 5:
            kind = self.pick(["s", "l"])
            name = "%s_%d" % (kind, len(self.set_vars))
            expr = self.str_expr(2) if kind == "s" else self.list_expr(2)
            self.set_vars.append(name)
            return self.tag("set %s = %s" % (name, expr)) + self.output(name)
        if choice == 6:
            return (self.tag("set ns = namespace(n=0, s='')") +
                    self.tag("for i in %s" % self.list_expr(1)) +
                    self.tag("set ns.n = ns.n + 1") + self.tag("set ns.s = ns.s ~ i") + self.tag("endfor") +
                    self.output("ns.n ~ ':' ~ ns.s"))
        if choice == 7:
            return (self.tag("macro mm(a, b=%s)" % self.str_expr(1)) + self.output("a ~ '|' ~ b") + self.ws() +
                    self.tag("endmacro") + self.output("mm(%s)" % self.any_expr(1)) +
                    self.output("mm(%s, b=%s)" % (self.any_expr(1), self.any_expr(1))))
        return "{#" + self.pick(["", "-"]) + " comment " + self.pick(["", "-"]) + "#}" + self.ws()

    def template(self):
        self.set_vars = []
        return "".join(self.ws() + self.statement(2) for _ in range(self.rng.randint(1, 4)))


def fuzz_cases(seed, count, context):
    fuzzer = TemplateFuzzer(seed)
    return [{"name": "fuzz_%04d" % i, "template": fuzzer.template(), "context": context} for i in range(count)]
