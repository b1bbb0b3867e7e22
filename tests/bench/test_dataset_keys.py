"""configuration.json names the dataset file the way specdec_bench's run.py
does, so readers of specdec_bench's folders (ours included) see the dataset."""
from __future__ import annotations

from launcher.bench.cli import parse_args, run_of_flags
from launcher.bench.point_configuration import dataset_path, specdec_dataset_keys
from launcher.contracts.job import BenchSpec, DatasetInput
from launcher.results.job_dir import _specdec_dataset


def test_a_job_specs_dataset_is_named_by_its_file():
    args = BenchSpec(model="tiny", tokenizer="/tok", save_dir="/r",
                     datasets=(DatasetInput("mtbench", "/d/mt.jsonl"), DatasetInput("specbench", "/d/sb.jsonl")))
    assert dataset_path(args, "specbench") == "/d/sb.jsonl"
    keys = specdec_dataset_keys("specbench", dataset_path(args, "specbench"))
    assert keys == {"mtbench": None, "specbench": "/d/sb.jsonl", "dataset": None, "dataset_path": None}
    assert _specdec_dataset(keys) == "specbench"
    assert _specdec_dataset(specdec_dataset_keys("mtbench", dataset_path(args, "mtbench"))) == "mtbench"


def test_the_command_lines_file_when_there_is_no_job_spec():
    args = run_of_flags(parse_args(["--mtbench", "/q/question.jsonl", "--save_dir", "/r", "--url", "http://h:1",
                                    "--model", "tiny", "--tokenizer", "/tok"])).bench
    assert specdec_dataset_keys("mtbench", dataset_path(args, "mtbench"))["mtbench"] == "/q/question.jsonl"


def test_speed_bench_is_dataset_speed_with_its_path():
    keys = specdec_dataset_keys("speed_qualitative", "/s/qualitative.parquet")
    assert keys["dataset"] == "speed" and keys["dataset_path"] == "/s/qualitative.parquet"
    assert _specdec_dataset(keys) == "speed_qualitative"
