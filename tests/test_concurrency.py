"""Runs that overlap lose nothing: concurrent `wordbench eval` processes merging into one results file, and
concurrent `wordbench score` processes sharing one SQLite response cache."""
import json, os, sqlite3, subprocess, sys
from pathlib import Path
import pandas as pd
import pytest

FIXTURES = Path(__file__).parent/'fixtures'
PLUGINS = os.pathsep.join(str(FIXTURES/f) for f in ('tiny_plugin.py', 'counting_backend.py'))
ROUNDS = 20


def env_for(tmp_path, **extra):
    return {**os.environ, 'WORDBENCH_PLUGINS': PLUGINS, 'TINY_ITEMS': str(tmp_path/'items.jsonl'),
            'WORDBENCH_CACHE': str(tmp_path/'cache'), **extra}


def start(args, env):
    return subprocess.Popen([sys.executable, '-m', 'wordbench.cli', *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs):
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs): assert p.returncode == 0, err[-2000:]
    return outs


@pytest.mark.parametrize('n_procs', [2, 4])
def test_concurrent_evals_keep_every_row(tmp_path, n_procs):
    "`n_procs` evals of one task and model, each with its own seed, into one folder: every run's rows, every round."
    env = env_for(tmp_path)
    subprocess.run([sys.executable, '-m', 'wordbench.cli', 'build', 'tiny-arith', '--n', '3'], env=env, check=True,
                   capture_output=True)
    for r in range(ROUNDS):
        out = tmp_path/f'results{r}'
        finish([start(['eval', 'tiny-arith', '--model', 'm', '--backend', 'dummy', '--no-cache', '--n', '3',
                       '--strategies', 'plain', 'words', '--shots', '0', '--seeds', seed, '--out', out], env)
                for seed in range(n_procs)])
        res = pd.read_csv(out/'tiny-arith_m.csv.gz')
        assert sorted(res.seed.unique()) == list(range(n_procs)), f'round {r}: seeds {sorted(res.seed.unique())}'
        assert len(res) == n_procs * 2 * 3, f'round {r}: {len(res)} rows'
        assert not [p.name for p in out.iterdir() if p.name.endswith('.tmp')]   # no temp file left behind


def write_requests(path, ids):
    "Score input: log-likelihood and generation lines for `ids`, each line twice (repeats within one file)."
    lines = [json.dumps({'context': f'ctx {i}', 'continuation': f' word{i}'}) for i in ids]
    lines += [json.dumps({'prompt': f'say {i}', 'max_tokens': 4, 'seed': i}) for i in ids if i % 3 == 0]
    path.write_text('\n'.join(lines + lines) + '\n')
    return 2 * len(lines)


def test_concurrent_scores_share_one_cache(tmp_path):
    "Four `wordbench score` processes, overlapping requests, one cache: all answered and stored, none computed twice."
    cache, log = tmp_path/'shared.sqlite', tmp_path/'computed'
    env = env_for(tmp_path, COUNT_LOG=str(log))
    sets = [range(k * 40, k * 40 + 120) for k in range(4)]          # each overlaps its neighbours by 80
    for rnd in range(3):
        n_lines = [write_requests(tmp_path/f'in{rnd}_{k}.jsonl', ids) for k, ids in enumerate(sets)]
        finish([start(['score', '--backend', 'counting', '--model', f'm{rnd}', '--backend-arg', 'delay=0.001',
                       '--input', tmp_path/f'in{rnd}_{k}.jsonl', '--output', tmp_path/f'out{rnd}_{k}.jsonl',
                       '--cache', cache, '--chunk-size', '8', '--requests-per-call', '24'], env) for k in range(4)])
        for k, n in enumerate(n_lines):
            rows = [json.loads(x) for x in (tmp_path/f'out{rnd}_{k}.jsonl').read_text().splitlines()]
            assert len(rows) == n and all(('logprob' in r or 'text' in r) and 'error' not in r for r in rows)
    logs = sorted(tmp_path.glob('computed.*'))
    assert 4 <= len(logs) <= 12          # a process whose requests others had already stored computes nothing
    for f in logs:
        done = f.read_text().splitlines()
        assert len(done) == len(set(done)), f'{f.name} computed a request twice'
    distinct = {x for f in logs for x in f.read_text().splitlines()}
    with sqlite3.connect(cache) as con: stored = con.execute('SELECT count(*) FROM results').fetchone()[0]
    assert stored == len(distinct) == 3 * (240 + 80)   # 240 distinct contexts, 80 prompts a round
