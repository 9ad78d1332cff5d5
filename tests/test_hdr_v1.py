"""HdrHistogram interval logs in the V1 encoding: exact round trip, the cookie YCSB's
HdrHistogram 2.1.4 checks, and 2.1.4 itself reading a log (its jars resolved from Maven Central
by ``mvn``, the way the HDFS and HBase jars are)."""

from __future__ import annotations

import base64
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from services.common import ServiceError
from services.maven import classpath_file, read_classpath, resolve_classpath
from workloads import hdr_v1
from workloads.measure import Measurements
from workloads.status import HdrLogs

#: HdrHistogram 2.1.4 (YCSB's) and the JAXB API it needs on Java 11+
POM = Path(__file__).parent / "hdr_v1_files" / "pom.xml"
READER = """
import org.HdrHistogram.*; import java.io.*;
public class ReadLog { public static void main(String[] a) throws Exception {
  HistogramLogReader r = new HistogramLogReader(new File(a[0]));
  long total = 0; long max = 0; EncodableHistogram h;
  while ((h = r.nextIntervalHistogram()) != null) {
    total += ((AbstractHistogram) h).getTotalCount();
    max = Math.max(max, ((AbstractHistogram) h).getMaxValue());
  }
  System.out.println(total + " " + max); } }
"""


def _log(tmp_path: Path) -> tuple[Path, Measurements]:
    logs = HdrLogs(str(tmp_path) + "/")
    whole = Measurements()
    for second, values in enumerate(([1, 5, 5, 900], [70_000, 3], [12])):
        interval = Measurements()
        for v in values:
            interval.record("READ", v)
        whole.merge(interval)
        logs.interval(interval, logs.base_ms + 1000 * second, logs.base_ms + 1000 * second + 999)
    logs.close()
    return tmp_path / "READ.hdr", whole


def test_round_trip_is_exact_and_cookie_is_v1(tmp_path):
    path, whole = _log(tmp_path)
    payloads = [line.rsplit(",", 1)[1] for line in path.read_text().splitlines()
                if line[:1].isdigit()]
    assert len(payloads) == 3
    merged = Measurements()
    for text in payloads:
        # what 2.1.4 checks first: the V1 compressed cookie with 8-byte words
        assert struct.unpack(">i", base64.b64decode(text)[:4])[0] == 0x1C849382
        merged.histogram("READ").add(hdr_v1.decode(text))
    a, b = merged.histograms["READ"], whole.histograms["READ"]
    assert a.get_total_count() == b.get_total_count() == 7
    assert [a.get_value_at_percentile(p) for p in (1, 50, 90, 100)] == \
        [b.get_value_at_percentile(p) for p in (1, 50, 90, 100)]


def _hdrhistogram_2_1_4() -> str:
    """The jars' classpath, resolved once into Maven's cache; a skip naming what is missing."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("needs java and mvn to fetch HdrHistogram 2.1.4 from Maven Central "
                    "(apt-get install openjdk-17-jre-headless maven)")
    try:
        resolve_classpath("hdrhistogram", "2.1.4", POM, lambda line: None, "~1 s, ~0.3 MB")
    except ServiceError as err:
        pytest.skip(f"cannot fetch HdrHistogram 2.1.4 from Maven Central: {err}")
    classpath = read_classpath(classpath_file("hdrhistogram", "2.1.4", POM))
    assert classpath, "mvn resolved no classpath"
    return classpath


def test_ycsbs_hdrhistogram_2_1_4_reads_the_log(tmp_path):
    classpath = _hdrhistogram_2_1_4()
    path, whole = _log(tmp_path)
    (tmp_path / "ReadLog.java").write_text(READER)
    out = subprocess.run(["java", "-cp", classpath,
                          str(tmp_path / "ReadLog.java"), str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    hist = whole.histograms["READ"]
    assert out.stdout.split() == [str(hist.get_total_count()), str(hist.get_max_value())]
