"""End-to-end: a scoring run killed half-way resumes from the SQLite cache and computes only what is missing."""
import json, os, re, signal, sqlite3, subprocess, sys, time
from pathlib import Path

N = 2000
WORDBENCH = Path(sys.executable).parent/'wordbench'


def run_scoring(tmp, delay):
    "`wordbench score` on the dummy backend (slowed by `delay` seconds a request), cached in `tmp`."
    cmd = [WORDBENCH, 'score', '--backend', 'dummy', '--model', 'resume-test', '--backend-arg', f'delay={delay}',
           '--input', tmp/'in.jsonl', '--output', tmp/'out.jsonl', '--cache', tmp/'cache.sqlite',
           '--requests-per-call', '100', '--chunk-size', '50']
    return subprocess.Popen([str(c) for c in cmd], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, 'WORDBENCH_CACHE': str(tmp/'wbcache')})


def cached_rows(db):
    if not db.exists(): return 0
    con = sqlite3.connect(str(db), timeout=30)
    try: return con.execute('SELECT COUNT(*) FROM results').fetchone()[0]
    except sqlite3.OperationalError: return 0   # table not created yet
    finally: con.close()


def summary(stderr):
    m = re.search(r'computed (\d+), cached (\d+), failed (\d+)', stderr)
    assert m, stderr
    return tuple(map(int, m.groups()))


def test_killed_run_resumes_from_cache(tmp_path):
    with open(tmp_path/'in.jsonl', 'w') as f:
        for i in range(N):
            f.write(json.dumps({'id': i, 'context': f'Item {i} context', 'continuation': f' answer {i % 7}'}) + '\n')
    proc = run_scoring(tmp_path, delay=0.004)          # 50-request chunks of ~0.2 s: the whole run takes ~8 s
    deadline = time.time() + 120
    while cached_rows(tmp_path/'cache.sqlite') < N // 4:
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, 'no progress'
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = cached_rows(tmp_path/'cache.sqlite')
    assert N // 4 <= kept < N and kept % 50 == 0, kept   # whole chunks only
    assert not (tmp_path/'out.jsonl').exists()

    resumed = run_scoring(tmp_path, delay=0.0)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert summary(err) == (N - kept, kept, 0)
    rows = [json.loads(l) for l in open(tmp_path/'out.jsonl')]
    assert len(rows) == N and [r['id'] for r in rows] == list(range(N))
    assert all(isinstance(r['logprob'], float) and isinstance(r['is_greedy'], bool) for r in rows)

    again = run_scoring(tmp_path, delay=0.0)           # everything cached now, same output
    _, err = again.communicate(timeout=120)
    assert summary(err) == (0, N, 0)
    assert [json.loads(l) for l in open(tmp_path/'out.jsonl')] == rows
