"""How a held-out case's answer is judged in `kb eval`'s grouping figures."""

from collections import Counter

from kb.services.evaluation import GroupingReport, _judge

CLASS_OF = {"a1": "oom", "a2": "oom", "b1": "nccl", "c1": "once"}
CLASSES = Counter(CLASS_OF.values())


def test_a_similar_answer_naming_the_right_incident_is_shown_first_but_not_grouped():
    result = _judge("a1", CLASS_OF, CLASSES, "similar", 85.0, 7, {"a2": 7, "b1": 8})
    assert result.top_right and not result.right


def test_a_known_answer_naming_the_right_incident_is_grouped():
    result = _judge("a1", CLASS_OF, CLASSES, "known", 97.0, 7, {"a2": 7, "b1": 8})
    assert result.top_right and result.right


def test_an_answer_naming_another_class_is_neither():
    result = _judge("a1", CLASS_OF, CLASSES, "similar", 85.0, 8, {"a2": 7, "b1": 8})
    assert not result.top_right and not result.right


def test_a_one_of_a_kind_case_is_right_only_when_kept_new():
    assert _judge("c1", CLASS_OF, CLASSES, "new", 0.0, None, {}).right
    assert not _judge("c1", CLASS_OF, CLASSES, "known", 95.0, 7, {"a2": 7}).right


def test_the_report_counts_recurring_cases_only():
    results = [_judge("a1", CLASS_OF, CLASSES, "similar", 85.0, 7, {"a2": 7}),
               _judge("a2", CLASS_OF, CLASSES, "new", 0.0, None, {}),
               _judge("c1", CLASS_OF, CLASSES, "new", 0.0, None, {})]
    report = GroupingReport(results, recurring=2, singletons=1)
    assert report.top_incident(CLASSES) == 0.5
    assert report.rr_at_1(CLASSES) == 0.0
    assert report.kept_new(CLASSES) == 1.0
