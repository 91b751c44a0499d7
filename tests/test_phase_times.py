"`.ci/phase-times` splits a timestamped `make figures` log into the main job's phases."
import subprocess, sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1]/'.ci'/'phase-times'

LOG = """\
23:50:00 python3.11 -m venv .venv
23:50:01 .venv/bin/python -m pip --disable-pip-version-check -q install torch==2.13.0
23:55:00 .venv/bin/wordbench setup
23:56:00 .venv/bin/wordbench doctor --strict
23:56:05 | wordnet | missing | apt-get install wordnet-base |
23:56:10 == build winodict
23:56:40 for t in $(.venv/bin/wordbench list tasks --grid cpu); do echo "== eval $t --grid cpu"; ...; done
23:56:41 == eval winodict --grid cpu
00:10:00 [wordbench.evaluate.tasks] winodict: 3,520 item-settings
00:20:41 == eval wscplus --grid cpu
00:30:00 == eval winodict --grid cpu-strategies
00:35:00 .venv/bin/wordbench export hf --out exports/hf
00:35:20 .venv/bin/wordbench regenerate --models smollm2-135m gemma3-270m --set strategy_models smollm2-135m
00:38:00 for m in smollm2-135m gemma3-270m; do .venv/bin/wordbench report --model $m --no-eval; done
00:38:30 == end
"""


def test_phases_from_a_log(tmp_path):
    log = tmp_path/'fresh.log'
    log.write_text(LOG)
    out = subprocess.run([sys.executable, str(SCRIPT), str(log)], check=True, capture_output=True, text=True).stdout
    rows = [line.split(',') for line in out.strip().splitlines()]
    assert rows[0] == ['phase', 'seconds']
    got = {p: int(s) for p, s in rows[1:]}
    assert list(got) == ['set-up', 'datasets', 'eval winodict (cpu)', 'eval wscplus (cpu)',
                         'eval winodict (cpu-strategies)', 'exports', 'regeneration', 'report cards']
    assert got['set-up'] == 360                  # the doctor's apt-get hint does not reopen set-up
    assert got['datasets'] == 41
    assert got['eval winodict (cpu)'] == 1440    # across midnight
    assert got['report cards'] == 30
    assert sum(got.values()) == 48 * 60 + 30


def test_usage_without_a_log():
    res = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode != 0 and 'Usage' in res.stderr
