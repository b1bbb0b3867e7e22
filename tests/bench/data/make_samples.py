"""Regenerate the small synthetic dataset samples in this folder.

Everything here is made up (nothing downloaded); the files copy the real
formats: FastChat MT-Bench question.jsonl, Spec-Bench question.jsonl and a
SPEED-Bench split prepared as parquet.

    .venv/bin/python tests/bench/data/make_samples.py
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MT_CATEGORIES = ["writing", "roleplay", "reasoning", "math",
                 "coding", "extraction", "stem", "humanities"]
TOPICS = ["a lighthouse", "a bakery", "the moon", "a river", "a library",
          "a bicycle", "a garden", "a volcano", "a train", "a violin"]


def mtbench_rows(n):
    rows = []
    for i in range(n):
        cat = MT_CATEGORIES[i // 10]
        topic = TOPICS[i % 10]
        rows.append({
            "question_id": 81 + i,
            "category": cat,
            "turns": [
                f"Write a short {cat} task answer about {topic}.",
                f"Now rewrite your previous answer about {topic} in one sentence.",
            ],
        })
    return rows


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    write_jsonl(HERE / "mtbench_16.jsonl", mtbench_rows(16))
    write_jsonl(HERE / "mtbench_80.jsonl", mtbench_rows(80))

    spec_cats = ["mt_bench", "translation", "summarization", "qa",
                 "math_reasoning", "rag", "translation", "qa"]
    spec = []
    for i, cat in enumerate(spec_cats):
        turns = [f"Spec-Bench {cat} prompt number {i} about {TOPICS[i]}."]
        if cat == "mt_bench":
            turns.append("Follow up: make it shorter.")
        spec.append({"question_id": 1000 + i, "category": cat, "turns": turns})
    write_jsonl(HERE / "specbench_8.jsonl", spec)

    import pyarrow as pa
    import pyarrow.parquet as pq

    # 12 rows, 3 categories in an uneven, interleaved order (coding 5,
    # math 4, writing 3; first appearance: coding, math, writing).
    cats = ["coding", "coding", "math", "coding", "writing", "math",
            "coding", "math", "writing", "coding", "math", "writing"]
    table = pa.table({
        "question_id": [f"speed-{i:04d}" for i in range(len(cats))],
        "category": cats,
        "turns": [[f"SPEED {c} question {i}: explain {TOPICS[i % 10]}."] for i, c in enumerate(cats)],
    })
    pq.write_table(table, HERE / "speed_qualitative_12.parquet")


if __name__ == "__main__":
    main()
