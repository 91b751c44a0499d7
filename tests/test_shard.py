"""Many processes, one run: `wordbench eval --shard K/N` in 2 and 4 processes at once, and 2 processes started as
torchrun starts them (RANK and WORLD_SIZE in their environment), leave the results file that one process writes,
byte for byte, and a run record of the whole run."""
import gzip, json, os, re, subprocess, sys
from pathlib import Path

PLUGIN = Path(__file__).parent/'fixtures'/'tiny_plugin.py'
LAUNCHER = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')   # what torchrun sets; never inherited here


def environment(tmp: Path, **extra) -> dict:
    "The test's environment: the tiny plugin task and its items, a private wordbench cache, no launcher variables."
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER}
    return {**env, 'WORDBENCH_PLUGINS': str(PLUGIN), 'TINY_ITEMS': str(tmp/'items.jsonl'),
            'WORDBENCH_CACHE': str(tmp/'wbcache'), **extra}


def evaluate(runs: list) -> list[str]:
    "Start every `(arguments, environment)` as `python -m wordbench eval ...` at once; their stderr, once all end."
    procs = [subprocess.Popen([sys.executable, '-m', 'wordbench', 'eval', *map(str, args)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args, env in runs]
    done = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, done): assert p.returncode == 0, err[-3000:]
    return [err for _, err in done]


def rows(path: Path) -> list[str]: return gzip.decompress(path.read_bytes()).decode().splitlines()


def record(path: Path) -> dict: return json.loads(path.with_name(path.name.replace('.csv.gz', '.json')).read_text())


def same_run(sharded: Path, one: Path, n: int):
    "The shards' file is the one process's, byte for byte, and so is what its record says of the whole run."
    assert rows(sharded) == rows(one) and sharded.read_bytes() == one.read_bytes()
    rec, rec1 = record(sharded), record(one)
    for k in ('results', 'n-samples', 'task_hashes', 'configs'): assert rec[k] == rec1[k], k
    assert rec['config']['shards'] == n and 'shards' not in rec1['config']


def test_two_and_four_shards_equal_one_process(tmp_path):
    items = [dict(id=f'sum{i}', a=i, b=i + 1, label=0) for i in range(10)]
    (tmp_path/'items.jsonl').write_text(''.join(json.dumps(it) + '\n' for it in items))
    env, common = environment(tmp_path), ['tiny-arith', '--model', 'a', '--backend', 'dummy', '--n', 10]
    evaluate([([*common, '--out', tmp_path/'one', '--cache', tmp_path/'one.sqlite'], env)])
    one = tmp_path/'one'/'tiny-arith_a.csv.gz'
    assert len(rows(one)) == 1 + 10 * 2   # header, then 10 sums x 2 strategies
    for n in (2, 4):
        (tmp_path/f'shared{n}').mkdir()   # one cache folder for the shards, as on one node
        errs = evaluate([([*common, '--out', tmp_path/f'shards{n}', '--cache', tmp_path/f'shared{n}',
                           '--shard', f'{k}/{n}'], env) for k in range(n)])
        same_run(tmp_path/f'shards{n}'/'tiny-arith_a.csv.gz', one, n)
        counts = [int(re.search(rf'tiny-arith a: (\d+) rows \(0 failed\) -> .* \(shard {k}/{n}\)', e)[1])
                  for k, e in enumerate(errs)]
        assert sum(counts) == 20 and max(counts) - min(counts) <= 2, counts   # each row once; shares differ by an id
        assert (tmp_path/f'shared{n}'/'results.sqlite').exists()


def test_launcher_environment_shards_a_real_task(tmp_path):
    "Two processes as torchrun starts them (no --shard), on a registered task whose requests are generations."
    common = ['newterm-coma', '--model', 'a', '--backend', 'dummy', '--grid', 'cpu', '--sample', 3]
    env = environment(tmp_path)
    evaluate([([*common, '--out', tmp_path/'one', '--no-cache'], env)])
    errs = evaluate([([*common, '--out', tmp_path/'ranks', '--cache', tmp_path/'ranks.sqlite'],
                      environment(tmp_path, RANK=str(k), WORLD_SIZE='2', LOCAL_RANK=str(k))) for k in range(2)])
    assert all(f'(shard {k}/2)' in e for k, e in enumerate(errs)), errs
    same_run(tmp_path/'ranks'/'newterm-coma_a.csv.gz', tmp_path/'one'/'newterm-coma_a.csv.gz', 2)
