"""Run in AIPerf's own environment: AIPerf 0.13's GoodRequestCountMetric judges each
record of profile_export.jsonl files against SLOs (tag -> ms), with AIPerf's own code.

    <aiperf venv>/bin/python aiperf_goodput_judge.py '[["RECORDS.jsonl", {"time_to_first_token": 100}], ...]'

prints a JSON list, one per case: per record 1 (good), 0 (not good) or null (a failed request)."""
import json
import sys

from aiperf.common.enums import MetricTimeUnit
from aiperf.metrics.metric_dicts import MetricRecordDict
from aiperf.metrics.metric_registry import MetricRegistry
from aiperf.metrics.types.good_request_count_metric import GoodRequestCountMetric


def judge(path: str, slos: dict) -> list:
    GoodRequestCountMetric.set_slos(slos)  # AIPerf converts the ms (display unit) to ns
    metric = GoodRequestCountMetric()
    out = []
    for line in open(path):
        o = json.loads(line)
        if o.get("error"):
            out.append(None)
            continue
        d = MetricRecordDict()
        for tag, v in o["metrics"].items():
            cls = MetricRegistry.get_class_or_none(tag)
            val = v.get("value")
            if cls is None or not isinstance(val, (int, float)):
                continue
            if v.get("unit") == "ms" and cls.unit == MetricTimeUnit.NANOSECONDS:  # the export is in display units
                val = val * 1e6
            d[tag] = val
        out.append(metric._parse_record(None, d))
    return out


print(json.dumps([judge(p, s) for p, s in json.loads(sys.argv[1])]))
