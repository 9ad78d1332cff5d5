"""The ``.properties`` reader against Java's own ``Properties.load`` on the same text, and the
shipped workload files found by ``-P NAME``."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from workloads import properties
from workloads.core import WorkloadError

#: every syntax Java's Properties.load knows: separators, escapes, continuations, comments
TRICKY = (
    "# comment\n"
    "! another comment\n"
    "   \n"
    "exportfile /tmp/run:1.json\n"
    "a=b=c\n"
    "colon:value: more\n"
    "spaced   =   v  \n"
    "ws\tsep tab\n"
    "uni=\\u0041\\u00e9x\n"
    "esc\\:key=esc\\=val\\t\\n\\\\end\n"
    "key\\ with\\ spaces = x\n"
    "cont = one, \\\n"
    "       two, \\\n"
    "   three\n"
    "even=ends\\\\\n"
    "next=line\n"
    "empty=\n"
    "bare\n"
    "  indented : yes\n"
    "crlf=1\r\n"
    "cr=2\r"
    "plain=\\q\n"
)

JAVA = """
import java.io.*; import java.util.*;
public class Dump { public static void main(String[] a) throws Exception {
  for (String f : a) {
    Properties p = new Properties();
    try (Reader r = new InputStreamReader(new FileInputStream(f), "UTF-8")) { p.load(r); }
    StringBuilder s = new StringBuilder("{");
    for (String k : new TreeSet<>(p.stringPropertyNames())) {
      if (s.length() > 1) s.append(",");
      s.append(q(k)).append(":").append(q(p.getProperty(k)));
    }
    System.out.println(s.append("}"));
  }
}
static String q(String t) { StringBuilder s = new StringBuilder("\\"");
  for (char c : t.toCharArray()) s.append(String.format("\\\\u%04x", (int) c));
  return s.append("\\"").toString(); } }
"""


def test_tricky_text_reads_as_documented():
    props = properties.parse_lines(TRICKY)
    assert props["exportfile"] == "/tmp/run:1.json"
    assert props["a"] == "b=c" and props["colon"] == "value: more"
    assert props["uni"] == "A\u00e9x" and props["esc:key"] == "esc=val\t\n\\end"
    assert props["key with spaces"] == "x" and props["cont"] == "one, two, three"
    assert props["even"] == "ends\\" and props["next"] == "line"
    assert props["bare"] == "" and props["indented"] == "yes" and props["spaced"] == "v  "
    assert props["crlf"] == "1" and props["cr"] == "2" and props["plain"] == "q"


def test_malformed_unicode_escape_is_one_clear_error():
    with pytest.raises(WorkloadError, match="uXXXX"):
        properties.parse_lines("k=\\u00zz\n")


@pytest.mark.skipif(shutil.which("java") is None, reason="no JDK on this machine")
def test_same_as_javas_properties_load(tmp_path):
    (tmp_path / "Dump.java").write_text(JAVA)
    text = tmp_path / "tricky.properties"
    text.write_bytes(TRICKY.encode("utf-8"))
    shipped = [text, *sorted(p for p in properties.WORKLOAD_DIR.iterdir() if p.is_file())]
    out = subprocess.run(["java", str(tmp_path / "Dump.java"), *map(str, shipped)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    for path, line in zip(shipped, out.splitlines(), strict=True):
        assert properties.read_file(path) == json.loads(line), path


def test_dash_P_finds_a_shipped_workload_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert properties.resolve_file("workloada") == properties.WORKLOAD_DIR / "workloada"
    (tmp_path / "workloada").write_text("recordcount=5\n")  # a file of that name wins
    assert properties.resolve_file("workloada").resolve() == (tmp_path / "workloada")
    with pytest.raises(WorkloadError, match="shipped workload's name: .*workloada"):
        properties.read_file(properties.resolve_file("nosuchfile"))
