"""Many processes, one run, no shared lock: `wordbench eval --shard K/N` in 2 and 4 processes at once, as on separate
nodes (each its own cache, and no lock working in the shared results folder), and processes started as torchrun and
srun start them (their ranks in the environment). Each writes its own part file; `wordbench merge` makes the results
file one process writes, byte for byte, with a run record of the whole run, and `wordbench cache merge` the nodes'
caches into one. Parts that are not one whole run are refused in one line."""
import gzip, json, os, re, sqlite3, subprocess, sys
from pathlib import Path

FIXTURES = Path(__file__).parent/'fixtures'
PLUGIN, NO_FLOCK = FIXTURES/'tiny_plugin.py', FIXTURES/'no_shared_flock.py'
LAUNCHER = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')   # what torchrun sets; never inherited here


def environment(tmp: Path, **extra) -> dict:
    "The test's environment: the tiny plugin task and its items, a private wordbench cache, no launcher variables."
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER and not k.startswith('SLURM_')}
    return {**env, 'WORDBENCH_PLUGINS': str(PLUGIN), 'TINY_ITEMS': str(tmp/'items.jsonl'),
            'WORDBENCH_CACHE': str(tmp/'wbcache'), **extra}


def start(args, env): return subprocess.Popen([sys.executable, '-m', 'wordbench', *map(str, args)], env=env, text=True,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def evaluate(runs: list) -> list[str]:
    "Start every `(arguments, environment)` as `python -m wordbench eval ...` at once; their stderr, once all end."
    procs = [start(['eval', *args], env) for args, env in runs]
    done = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, done): assert p.returncode == 0, err[-3000:]
    return [err for _, err in done]


def wordbench(*args, env, ok=True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, '-m', 'wordbench', *map(str, args)], env=env, text=True, capture_output=True,
                       timeout=300)
    assert (p.returncode == 0) == ok, p.stderr[-3000:]
    return p


def rows(path: Path) -> list[str]: return gzip.decompress(path.read_bytes()).decode().splitlines()


def record(path: Path) -> dict: return json.loads(path.with_name(path.name.replace('.csv.gz', '.json')).read_text())


def same_run(sharded: Path, one: Path, n: int):
    "The shards' file is the one process's, byte for byte, and so is what its record says of the whole run."
    assert rows(sharded) == rows(one) and sharded.read_bytes() == one.read_bytes()
    rec, rec1 = record(sharded), record(one)
    for k in ('results', 'n-samples', 'task_hashes', 'configs'): assert rec[k] == rec1[k], k
    assert rec['config']['shards'] == n and 'shards' not in rec1['config']
    assert not list(sharded.parent.glob('*.part-*'))   # the parts are gone once merged


def one_line_error(p: subprocess.CompletedProcess) -> str:
    "The one error line of a failed command (no traceback)."
    errors = [line for line in p.stderr.splitlines() if ': error: ' in line]
    assert p.returncode == 2 and 'Traceback' not in p.stderr and len(errors) == 1, p.stderr[-3000:]
    return errors[0]


def keys(cache: Path) -> list:
    with sqlite3.connect(cache) as con: return sorted(con.execute('SELECT key, result FROM results').fetchall())


def test_shards_on_separate_nodes_merge_into_one_process(tmp_path):
    items = [dict(id=f'sum{i}', a=i, b=i + 1, label=0) for i in range(10)]
    (tmp_path/'items.jsonl').write_text(''.join(json.dumps(it) + '\n' for it in items))
    env, common = environment(tmp_path), ['tiny-arith', '--model', 'a', '--backend', 'dummy', '--n', 10]
    evaluate([([*common, '--out', tmp_path/'one', '--cache', tmp_path/'one.sqlite'], env)])
    one = tmp_path/'one'/'tiny-arith_a.csv.gz'
    assert len(rows(one)) == 1 + 10 * 2   # header, then 10 sums x 2 strategies
    for n in (2, 4):
        shared = tmp_path/f'shared{n}'   # the results folder every node sees, where no lock works
        nodes = environment(tmp_path, WORDBENCH_PLUGINS=os.pathsep.join(map(str, (PLUGIN, NO_FLOCK))),
                            NO_FLOCK_UNDER=str(shared))
        locked = wordbench('eval', *common, '--out', shared, '--no-cache', env=nodes, ok=False)
        assert 'does not appear to support flock' in locked.stderr   # one process locks its results file: refused
        errs = evaluate([([*common, '--out', shared, '--cache', f'{tmp_path}/node{n}-{k}/', '--shard', f'{k}/{n}'],
                          nodes) for k in range(n)])
        counts = [int(re.search(rf'tiny-arith a: (\d+) rows \(0 failed\) -> .*part-{k}-of-{n}.* \(shard {k}/{n}\)',
                                e)[1]) for k, e in enumerate(errs)]
        assert sum(counts) == 20 and max(counts) - min(counts) <= 2, counts   # each row once; shares differ by an id
        assert not (shared/'tiny-arith_a.csv.gz').exists() and len(list(shared.glob('*.part-*.csv.gz'))) == n
        merged = wordbench('merge', 'tiny-arith', '--results', shared, env=env)
        assert merged.stdout.split() == [str(shared/'tiny-arith_a.csv.gz')]
        same_run(shared/'tiny-arith_a.csv.gz', one, n)
        nodes_caches = [tmp_path/f'node{n}-{k}'/'results.sqlite' for k in range(n)]
        said = wordbench('cache', 'merge', *nodes_caches, '--into', tmp_path/f'all{n}.sqlite', env=env).stdout
        assert said.strip() == '40 added, 0 already there, 0 differing (the first kept)', said
        assert keys(tmp_path/f'all{n}.sqlite') == keys(tmp_path/'one.sqlite')   # every answer one process stored


def test_parts_of_another_identity_or_lacking_a_row_are_refused(tmp_path):
    (tmp_path/'items.jsonl').write_text(''.join(json.dumps(dict(id=f's{i}', a=i, b=1, label=0)) + '\n'
                                                for i in range(6)))
    env, common = environment(tmp_path), ['tiny-arith', '--model', 'a', '--backend', 'dummy', '--n', 6, '--no-cache']
    out, merge = tmp_path/'res', ['merge', 'tiny-arith', '--results', tmp_path/'res']
    evaluate([([*common, '--out', out, '--shard', f'{k}/3'], env) for k in (0, 1)]
             + [([*common, '--out', out, '--shard', '2/3', '--backend-arg', 'noise=0.5'], env)])
    assert one_line_error(wordbench(*merge, env=env, ok=False)).startswith(
        'wordbench: error: tiny-arith_a.part-2-of-3.csv.gz ran dummy:a:noise0.5, but tiny-arith_a.part-0-of-3.csv.gz '
        'ran dummy:a; fix: ')
    evaluate([([*common, '--out', out, '--shard', '2/3'], env)])
    part = out/'tiny-arith_a.part-1-of-3.csv.gz'
    lines = rows(part)
    part.write_bytes(gzip.compress(('\n'.join(lines[:-1]) + '\n').encode()))   # a row lost on the way
    assert "tiny-arith_a.part-1-of-3.csv.gz lacks item {'strategy': 'words'" in one_line_error(
        wordbench(*merge, env=env, ok=False))
    (out/'tiny-arith_a.part-1-of-3.csv.gz').unlink()
    assert 'tiny-arith_a.part-1-of-3.csv.gz is missing; fix: run that shard to its end (--shard 1/3' in \
        one_line_error(wordbench(*merge, env=env, ok=False))
    assert not (out/'tiny-arith_a.csv.gz').exists()


def test_launchers_shard_a_real_task(tmp_path):
    "Two processes as torchrun starts them, then two as an srun step does (no --shard), on a task that generates."
    common = ['newterm-coma', '--model', 'a', '--backend', 'dummy', '--grid', 'cpu', '--sample', 3]
    env = environment(tmp_path)
    evaluate([([*common, '--out', tmp_path/'one', '--no-cache'], env)])
    launched = {'torchrun': lambda k: dict(RANK=str(k), WORLD_SIZE='2', LOCAL_RANK=str(k)),
                'srun': lambda k: dict(SLURM_PROCID=str(k), SLURM_NTASKS='2', SLURM_LOCALID=str(k), SLURM_STEP_ID='0')}
    for name, ranks in launched.items():
        errs = evaluate([([*common, '--out', tmp_path/name, '--cache', tmp_path/f'{name}{k}.sqlite'],
                          environment(tmp_path, **ranks(k))) for k in range(2)])
        assert all(f'(shard {k}/2)' in e for k, e in enumerate(errs)), errs
        wordbench('merge', '--results', tmp_path/name, env=env)
        same_run(tmp_path/name/'newterm-coma_a.csv.gz', tmp_path/'one'/'newterm-coma_a.csv.gz', 2)
