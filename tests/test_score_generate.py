"""End-to-end: `wordbench score` answers generation requests from JSONL (chat messages or raw prompts), cached and
resumable; malformed generation lines are errors naming file:line:field before any model loads."""
import json, os, re, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest

WORDBENCH = Path(sys.executable).parent/'wordbench'


def score(tmp, *args, backend='dummy', model='gen-test', input='in.jsonl', output='out.jsonl'):
    "Start `wordbench score` on `tmp/input`, cached in `tmp/cache.sqlite`."
    cmd = [WORDBENCH, 'score', '--backend', backend, '--model', model, '--input', tmp/input, '--output', tmp/output,
           '--cache', tmp/'cache.sqlite', *args]
    return subprocess.Popen([str(c) for c in cmd], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, 'WORDBENCH_CACHE': str(tmp/'wbcache')})


def summary(stderr):
    m = re.search(r'scored (\d+) requests from .*: computed (\d+), cached (\d+), failed (\d+)', stderr)
    assert m, stderr
    return tuple(map(int, m.groups()))


def write_lines(path, lines):
    path.write_text(''.join(json.dumps(l) + '\n' for l in lines))


def cached_rows(db):
    if not db.exists(): return 0
    con = sqlite3.connect(str(db), timeout=30)
    try: return con.execute('SELECT COUNT(*) FROM results').fetchone()[0]
    except sqlite3.OperationalError: return 0
    finally: con.close()


def test_generation_lines_round_trip(tmp_path):
    lines = [{'id': 0, 'messages': [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}],
              'max_tokens': 32},
             {'id': 1, 'prompt': 'A robin is a', 'max_tokens': 2},
             {'id': 2, 'prompt': 'A robin is a', 'max_tokens': 32, 'stop': ['answer'], 'temperature': 0.7, 'seed': 3},
             {'id': 3, 'context': 'A robin is a', 'continuation': ' bird'}]
    write_lines(tmp_path/'in.jsonl', lines)
    _, err = score(tmp_path).communicate(timeout=120)
    assert summary(err) == (4, 4, 0, 0)
    rows = [json.loads(l) for l in open(tmp_path/'out.jsonl')]
    assert [r['id'] for r in rows] == [0, 1, 2, 3]
    assert all(rows[i][k] == lines[i][k] for i in range(4) for k in lines[i])   # input fields pass through
    assert [r.get('finish_reason') for r in rows] == ['eos', 'length', 'stop', None]
    assert all(isinstance(r['text'], str) and isinstance(r['completion_tokens'], int) for r in rows[:3])
    assert rows[2]['text'] == 'dummy ' and isinstance(rows[3]['logprob'], float)
    again = score(tmp_path, output='again.jsonl')
    _, err = again.communicate(timeout=120)
    assert summary(err) == (4, 0, 4, 0)
    assert [json.loads(l) for l in open(tmp_path/'again.jsonl')] == rows


def test_killed_generation_run_resumes(tmp_path):
    n = 1200
    write_lines(tmp_path/'in.jsonl', [{'id': i, 'messages': [{'role': 'user', 'content': f'Question {i}?'}],
                                       'max_tokens': 16, 'seed': i} for i in range(n)])
    proc = score(tmp_path, '--backend-arg', 'delay=0.005', '--requests-per-call', '100', '--chunk-size', '50')
    deadline = time.time() + 120
    while cached_rows(tmp_path/'cache.sqlite') < n // 4:
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, 'no progress'
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = cached_rows(tmp_path/'cache.sqlite')
    assert n // 4 <= kept < n and kept % 50 == 0, kept
    assert not (tmp_path/'out.jsonl').exists()
    _, err = score(tmp_path).communicate(timeout=120)
    assert summary(err) == (n, n - kept, kept, 0)
    rows = [json.loads(l) for l in open(tmp_path/'out.jsonl')]
    assert [r['id'] for r in rows] == list(range(n)) and all(r['finish_reason'] == 'eos' for r in rows)
    fresh = tmp_path/'fresh'
    fresh.mkdir()
    (fresh/'in.jsonl').write_text((tmp_path/'in.jsonl').read_text())
    _, err = score(fresh).communicate(timeout=120)
    assert summary(err) == (n, n, 0, 0)
    assert [json.loads(l) for l in open(fresh/'out.jsonl')] == rows   # resumed = computed in one go


@pytest.mark.parametrize('line, field', [
    ({'max_tokens': 32}, "field 'messages': missing"),
    ({'messages': [{'role': 'robot', 'content': 'Hi'}]}, "field 'messages[0].role'"),
    ({'prompt': 'Hi', 'max_tokens': '32'}, "field 'max_tokens': expected int"),
    ({'prompt': 'Hi', 'max_tokens': 3.5}, "field 'max_tokens': expected int")])
def test_malformed_line_fails_before_the_model_loads(tmp_path, line, field):
    write_lines(tmp_path/'in.jsonl', [{'prompt': 'fine', 'max_tokens': 4}, line])
    t = time.time()
    proc = score(tmp_path, backend='hf', model='no-such-model-anywhere')   # loading it would fail differently
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert f"in.jsonl:2: {field}" in err, err
    assert 'no-such-model' not in err and not (tmp_path/'out.jsonl').exists()


def test_hf_engine_from_a_file(tmp_path):
    "The real engine behind the command: smollm2-135m answers chat and raw lines; a second run is cached."
    lines = [{'messages': [{'role': 'user', 'content': 'What is the capital of France? One word.'}], 'max_tokens': 6},
             {'messages': [{'role': 'user', 'content': 'What is the capital of France? Answer in one word.'}],
              'max_tokens': 12, 'stop': '.'},
             {'prompt': '1, 2, 3, 4,', 'max_tokens': 3}]
    write_lines(tmp_path/'in.jsonl', lines)
    proc = score(tmp_path, backend='hf', model='smollm2-135m')
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert summary(err) == (3, 3, 0, 0)
    rows = [json.loads(l) for l in open(tmp_path/'out.jsonl')]
    assert 'Paris' in rows[0]['text'] and rows[2]['text'].startswith(' 5'), rows
    assert [r['prompt_format'] for r in rows] == ['chat-template', 'chat-template', 'raw']
    assert rows[2]['finish_reason'] == 'length' and rows[2]['completion_tokens'] == 3
    assert rows[1]['finish_reason'] == 'stop' and 'Paris' in rows[1]['text'] and '.' not in rows[1]['text'], rows
    _, err = score(tmp_path, backend='hf', model='smollm2-135m', output='again.jsonl').communicate(timeout=600)
    assert summary(err) == (3, 0, 3, 0)
