"`.ci/phase-times` splits a timestamped `make figures` log into the main job's phases."
import subprocess, sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1]/'.ci'/'phase-times'

LOG = """\
23:50:00 python3.11 -m venv .venv
23:50:01 .venv/bin/python -m pip --disable-pip-version-check -q install torch==2.13.0
23:55:00 .venv/bin/wordbench setup
23:56:00 for b in $(.venv/bin/wordbench list builders --main); do echo "== build $b"; ...; done
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


CONCURRENT = """\
10:00:00 python3.11 -m venv .venv
10:01:00 == build winodict
10:02:00 .venv/bin/wordbench results --grid cpu --models a b --strategy-models a --workers 2 -- --batch-size 8
10:02:03 == 5 evaluations, 2 at once
10:02:03 == eval winodict --grid cpu --model a
10:02:03 == eval winodict --grid cpu --model b
10:07:03 == done winodict --grid cpu --model b in 300 s
10:07:03 == eval wscplus --grid cpu --model b
10:09:03 == done winodict --grid cpu --model a in 420 s
10:09:03 == eval winodict --grid cpu-strategies --model a
10:11:03 == done wscplus --grid cpu --model b in 240 s
10:11:03 == eval wscplus --grid cpu --model a
10:13:03 == done winodict --grid cpu-strategies --model a in 240 s
10:14:03 == done wscplus --grid cpu --model a in 180 s
10:14:05 .venv/bin/wordbench export hf --out exports/hf
10:14:10 .venv/bin/wordbench regenerate --models a b
10:15:10 == end
"""


def test_concurrent_evaluations_share_their_stretch(tmp_path):
    "Jobs that overlap: each eval phase gets the stretch's wall time in proportion to its jobs' seconds."
    log = tmp_path/'fresh.log'
    log.write_text(CONCURRENT)
    out = subprocess.run([sys.executable, str(SCRIPT), str(log)], check=True, capture_output=True, text=True).stdout
    got = {p: int(s) for p, s in (line.split(',') for line in out.strip().splitlines()[1:])}
    assert list(got) == ['set-up', 'datasets', 'eval winodict (cpu)', 'eval wscplus (cpu)',
                         'eval winodict (cpu-strategies)', 'exports', 'regeneration']
    stretch = 12 * 60 + 2                         # 10:02:03 to 10:14:05
    ran = {'eval winodict (cpu)': 720, 'eval wscplus (cpu)': 420, 'eval winodict (cpu-strategies)': 240}
    for phase, seconds in ran.items(): assert abs(got[phase] - stretch * seconds / 1380) <= 1
    assert sum(got[p] for p in ran) == stretch
    assert sum(got.values()) == 15 * 60 + 10
