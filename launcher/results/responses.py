"""Response rows as specdec_bench writes them per dataset kind."""
from __future__ import annotations

from typing import Optional, Sequence

from launcher.results.layout import GENERIC, MTBENCH, MTBENCH_TOPICS


def response_rows(kind: str, user_turns: Sequence[Sequence[str]], answers: Sequence[Sequence[str]],
                  question_ids: Optional[Sequence] = None, categories: Optional[Sequence[str]] = None,
                  system_prompts: Optional[Sequence[Optional[str]]] = None) -> list[dict]:
    """MTBench: question_id = 81 + index (int), category from the topic list;
    SpecBench: the row's question_id and category; others: question_id = index
    (and system_prompt when there is one)."""
    rows = []
    for i, (q, a) in enumerate(zip(user_turns, answers)):
        row: dict = {}
        if kind == MTBENCH:
            row["question_id"] = i + 81
            row["category"] = MTBENCH_TOPICS[i // 10]
        elif kind == GENERIC:
            row["question_id"] = i
            if system_prompts and system_prompts[i] is not None:
                row["system_prompt"] = system_prompts[i]
        else:
            row["question_id"] = question_ids[i]
            row["category"] = categories[i]
        row["turns"] = list(q)
        row["choices"] = [{"index": 0, "turns": list(a)}]
        rows.append(row)
    return rows
