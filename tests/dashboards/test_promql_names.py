"""The PromQL metric-name extractor the dashboard checks rely on: it must find every selected
metric and nothing else, and refuse what it does not understand."""

from __future__ import annotations

import pytest

from tests.dashboards.promql import metric_names, split_label_values


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("up", {"up"}),
        ('kafka_a{cluster="$cluster",broker=~"$broker"}', {"kafka_a"}),
        ('sum by (broker) (rate(kafka_a_total{x="y"}[$__rate_interval]))', {"kafka_a_total"}),
        ("sum without (instance) (kafka_a)", {"kafka_a"}),
        ("histogram_quantile(0.99, sum by (le, request) (rate(kafka_h_bucket[5m])))", {"kafka_h_bucket"}),
        ("min_over_time(kafka_p[2m]) > 0 and increase(kafka_c_count[2m]) == 0", {"kafka_p", "kafka_c_count"}),
        ("sum(a) / on (x) group_left (y) b offset 5m > bool 0", {"a", "b"}),
        ("a * on (x) group_left b", {"a", "b"}),
        ("count by (cluster) ((a == 1) and (b == 1)) > 0", {"a", "b"}),
        ("topk(10, max by (t, p) (changes(i[15m])))", {"i"}),
        ("a unless ignoring (le) b or c", {"a", "b", "c"}),
        ('label_replace(a, "dst", "$1", "src", "(.*)")', {"a"}),
        ("1e3 * a + 0x10 - .5", {"a"}),
        ("a @ 1609746000", {"a"}),
        ("rate(a[5m:30s])", {"a"}),
    ],
)
def test_metric_names_finds_selected_metrics_only(expr: str, expected: set[str]) -> None:
    assert metric_names(expr) == expected


def test_label_names_and_strings_are_never_metric_names() -> None:
    names = metric_names('sum by (broker, topic) (kafka_a{request="Produce",error!~"NONE|x"})')
    assert names == {"kafka_a"}


@pytest.mark.parametrize(
    "expr",
    [
        "rtae(kafka_a[5m])",  # a typo of a function must not read as a metric
        "sum(kafka_a",
        'kafka_a{x="y"',
        "kafka_a # comment?",
        '{__name__=~"kafka_.*"}',  # names no metric the check could verify
    ],
)
def test_what_it_cannot_read_is_an_error(expr: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        metric_names(expr)


def test_label_values_queries_split_into_selector_and_label() -> None:
    assert split_label_values('label_values(kafka_a{cluster="$cluster"}, broker)') == (
        'kafka_a{cluster="$cluster"}',
        "broker",
    )
    with pytest.raises(ValueError, match="label_values"):
        split_label_values("query_result(kafka_a)")
