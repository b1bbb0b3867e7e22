"""configuration.json names the dataset file the way specdec_bench's run.py
does, so readers of specdec_bench's folders (ours included) see the dataset."""
from __future__ import annotations

import argparse

from launcher.bench.point import dataset_path, specdec_dataset_keys
from launcher.results.job_dir import _specdec_dataset


def test_a_job_specs_dataset_is_named_by_its_file():
    args = argparse.Namespace(datasets=[("mtbench", "/d/mt.jsonl"), ("specbench", "/d/sb.jsonl")],
                              mtbench=None, specbench=None)
    assert dataset_path(args, "specbench") == "/d/sb.jsonl"
    keys = specdec_dataset_keys("specbench", dataset_path(args, "specbench"))
    assert keys == {"mtbench": None, "specbench": "/d/sb.jsonl", "dataset": None, "dataset_path": None}
    assert _specdec_dataset(keys) == "specbench"
    assert _specdec_dataset(specdec_dataset_keys("mtbench", dataset_path(args, "mtbench"))) == "mtbench"


def test_the_command_lines_file_when_there_is_no_job_spec():
    args = argparse.Namespace(mtbench="/q/question.jsonl", specbench=None)
    assert specdec_dataset_keys("mtbench", dataset_path(args, "mtbench"))["mtbench"] == "/q/question.jsonl"


def test_speed_bench_is_dataset_speed_with_its_path():
    keys = specdec_dataset_keys("speed_qualitative", "/s/qualitative.parquet")
    assert keys["dataset"] == "speed" and keys["dataset_path"] == "/s/qualitative.parquet"
    assert _specdec_dataset(keys) == "speed_qualitative"
