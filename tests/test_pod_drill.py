"""The pod drill (tests/scripts/pod_drill.py): a small sweep run by three hosts that share only
an S3 bucket, behind a proxy that holds back and loses responses, while runs are killed and
stopped past their lease. Slow: one round takes a few minutes on 2 cores."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_a_pod_drill_round_loses_nothing(tmp_path):
  out = tmp_path / 'drill.json'
  proc = subprocess.run(
    [
      sys.executable,
      os.path.join(ROOT, 'tests', 'scripts', 'pod_drill.py'),
      '--hosts=3',
      '--kills=2',
      '--stops=2',
      f'--json={out}',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=3000,
  )
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  (row,) = json.loads(out.read_text())['rounds']
  assert row['finished'] and row['report_equal'], row
  assert row['kills'] == 2 and row['stops'] == 2
  assert row['slow_responses'] + row['held_past_timeout'] + row['lost_responses'] > 0
  assert row['unexpected_statuses'] == 0 and row['writes_after_takeover'] == 0, row
