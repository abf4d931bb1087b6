"""Metric names referenced by a PromQL expression (or a Grafana ``label_values`` query).

A small tokenizer, enough for the dashboards' and rules' PromQL: string literals, numbers and
durations, Grafana variables, identifiers and punctuation. An identifier is a metric name unless it
is a function or aggregation (followed by ``(``), a keyword (``by``, ``and``, ``offset``...), a
label name (inside ``{...}``, or in the parenthesised list after ``by``/``without``/``on``/
``ignoring``/``group_left``/``group_right``), or part of a range or duration. An unknown function
name, unbalanced brackets and a ``__name__`` matcher are errors rather than guesses, so nothing
can hide a metric from the check.
"""

from __future__ import annotations

import re

__all__ = ["FUNCTIONS", "metric_names", "split_label_values"]

# PromQL functions and aggregation operators (Prometheus 2.42) plus Grafana's variable functions.
FUNCTIONS = frozenset(
    (
        "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
        "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
        "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg", "delta",
        "deriv", "exp", "floor", "histogram_quantile", "holt_winters", "hour", "idelta", "increase",
        "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time",
        "max_over_time", "min_over_time", "minute", "month", "pi", "predict_linear", "present_over_time",
        "quantile_over_time", "rad", "rate", "resets", "round", "scalar", "sgn", "sin", "sinh", "sort",
        "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time",
        "timestamp", "vector", "year", "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
        "count_values", "bottomk", "topk", "quantile", "label_values", "query_result"
    )
)  # fmt: skip
_KEYWORDS = frozenset(
    (
        "and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on", "ignoring",
        "group_left", "group_right"
    )
)  # fmt: skip
_LABEL_LIST_KEYWORDS = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<variable>\$\{[^}]*\}|\$\w+|\[\[\w+\]\])
  | (?P<number>0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])?)
  | (?P<identifier>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<operator>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}\[\]@])
    """,
    re.VERBOSE,
)


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        if match is None:
            raise ValueError(f"cannot tokenize {expr[position : position + 20]!r} in {expr!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            tokens.append((kind, match.group()))
        position = match.end()
    return tokens


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects."""
    tokens = _tokens(expr)
    names: set[str] = set()
    depth = {"{": 0, "[": 0, "(": 0}
    skip_label_list = False
    label_list_depth = 0
    for index, (kind, text) in enumerate(tokens):
        following = tokens[index + 1][1] if index + 1 < len(tokens) else ""
        if kind == "operator":
            if text in ("{", "[", "("):
                depth[text] += 1
            elif text in ("}", "]", ")"):
                depth[{"}": "{", "]": "[", ")": "("}[text]] -= 1
                if min(depth.values()) < 0:
                    raise ValueError(f"unbalanced brackets in {expr!r}")
            if text == "(" and skip_label_list:
                label_list_depth += 1
            elif text == ")" and label_list_depth:
                label_list_depth -= 1
                skip_label_list = label_list_depth > 0
            continue
        if kind == "identifier" and text == "__name__":
            raise ValueError(f"{expr!r} selects metrics by __name__: name them, so they can be checked")
        if kind != "identifier" or depth["{"] or depth["["] or label_list_depth:
            continue
        if text in _LABEL_LIST_KEYWORDS:
            # ``group_left`` may stand without a label list.
            skip_label_list = following == "("
            continue
        if text in _KEYWORDS:
            continue
        # A function call, or an aggregation whose grouping comes first: ``sum by (x) (...)``.
        if following in ("(", "by", "without"):
            if text not in FUNCTIONS:
                raise ValueError(f"unknown PromQL function {text!r} in {expr!r}")
            continue
        names.add(text)
    if any(depth.values()) or label_list_depth:
        raise ValueError(f"unbalanced brackets in {expr!r}")
    return names


_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*(?P<selector>.+?)\s*,\s*(?P<label>[A-Za-z_]\w*)\s*\)\s*$", re.DOTALL
)


def split_label_values(query: str) -> tuple[str, str]:
    """``label_values(selector, label)`` → (selector, label); anything else is an error here
    (the dashboards use no other variable query form)."""
    match = _LABEL_VALUES.match(query)
    if match is None:
        raise ValueError(f"not a label_values(selector, label) query: {query!r}")
    return match["selector"], match["label"]
