"""Results that never mix: `wordbench eval` of one model under two identities into one results file keeps both and
says which identity it appended; analyses and the report card refuse to read the file until one is picked; the
committed results carry the identity of the backend that computed them."""
import gzip, json, os, subprocess, sys
from pathlib import Path
import pytest

PLUGIN = Path(__file__).parent/'fixtures'/'tiny_plugin.py'
LAUNCHER = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')


def wordbench(tmp: Path, *args) -> subprocess.CompletedProcess:
    "`python -m wordbench ARGS` with the tiny plugin task, its items and a private cache."
    env = {**{k: v for k, v in os.environ.items() if k not in LAUNCHER}, 'WORDBENCH_PLUGINS': str(PLUGIN),
           'TINY_ITEMS': str(tmp/'items.jsonl'), 'WORDBENCH_CACHE': str(tmp/'wbcache')}
    return subprocess.run([sys.executable, '-m', 'wordbench', *map(str, args)], env=env, text=True,
                          capture_output=True, timeout=300)


def tiny_task():
    "The plugin's task, loaded here as `WORDBENCH_PLUGINS` loads it in the subprocesses."
    import importlib.util
    from wordbench.publish.analysis import ANALYSES
    from wordbench.build import BUILDERS
    from wordbench.evaluate.tasks import TASKS
    registries = (TASKS, BUILDERS, ANALYSES)
    before = [dict(r) for r in registries]
    spec = importlib.util.spec_from_file_location('tiny_plugin', PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for r, names in zip(registries, before):   # registered nowhere else: other tests iterate every task
        r.clear()
        r.update(names)
    return module.TinyArith()


@pytest.fixture(scope='module')
def two_identities(tmp_path_factory):
    "One results file of model `a` evaluated twice: by the dummy backend, and by it with noise (another identity)."
    tmp = tmp_path_factory.mktemp('identity')
    items = [dict(id=f'sum{i}', a=i, b=i + 1, label=0) for i in range(6)]
    (tmp/'items.jsonl').write_text(''.join(json.dumps(it) + '\n' for it in items))
    common = ['eval', 'tiny-arith', '--model', 'a', '--backend', 'dummy', '--n', 6, '--out', tmp/'res']
    runs = [wordbench(tmp, *common), wordbench(tmp, *common, '--backend-arg', 'noise=0.5')]
    for r in runs: assert r.returncode == 0, r.stderr[-3000:]
    return tmp, runs


def test_eval_keeps_identities_apart_and_says_which(two_identities):
    from wordbench.evaluate.results import read_results
    tmp, runs = two_identities
    path = tmp/'res'/'tiny-arith_a.csv.gz'
    assert f'-> {path}, identity dummy:a\n' in runs[0].stderr
    assert f'-> {path}, identity dummy:a:noise0.5\n' in runs[1].stderr
    rows = read_results(path, tiny_task().schema)
    assert rows.identity.value_counts().to_dict() == {'dummy:a': 12, 'dummy:a:noise0.5': 12}   # nothing replaced
    header = gzip.decompress(path.read_bytes()).decode().splitlines()[0]
    assert header.startswith('task,model,strategy,') and header.endswith(',identity')   # the last column


def test_analysis_loading_refuses_then_picks(two_identities):
    from wordbench.core import UserError
    tmp, task = two_identities[0], tiny_task()
    with pytest.raises(UserError, match=r'holds identities: dummy:a, dummy:a:noise0\.5; fix: name one as '
                                        r'MODEL\[IDENTITY\]'):
        task.results(['a'], tmp/'res')
    noisy = task.results(['a[noise0.5]'], tmp/'res')
    assert (len(noisy), set(noisy.identity), set(noisy.model)) == (12, {'dummy:a:noise0.5'}, {'a[noise0.5]'})
    assert set(task.results(['a[dummy:a]'], tmp/'res').identity) == {'dummy:a'}


def test_report_card_refuses_then_picks(two_identities):
    tmp, _ = two_identities
    card = ['report', '--model', 'a', '--backend', 'dummy', '--no-eval', '--results', tmp/'res', '--tasks',
            'tiny-arith', '--out', tmp/'card']
    refused = wordbench(tmp, *card)
    assert refused.returncode == 2 and not (tmp/'card'/'README.md').exists()
    err = refused.stderr.strip().splitlines()[-1]
    assert err.startswith('wordbench: error: ') and 'holds identities: dummy:a, dummy:a:noise0.5' in err, err
    assert '--identity IDENTITY' in err
    picked = wordbench(tmp, *card, '--identity', 'dummy:a:noise0.5')
    assert picked.returncode == 0, picked.stderr[-3000:]
    page = (tmp/'card'/'README.md').read_text()
    assert '# Report card: a' in page and '--identity dummy:a:noise0.5`' in page   # the remake command picks it too


def test_committed_results_carry_the_default_identity():
    "Every committed file holds one identity: the CPU float32 `hf` identity of its model (given by the migration)."
    from wordbench.systems import load_systems
    from wordbench.core import project_root
    from wordbench.evaluate.tasks import TASKS, default_identity
    from wordbench.evaluate.results import read_results
    load_systems()
    seen = 0
    for name, task in TASKS.items():
        for p in sorted((project_root()/'data'/'results').glob(f'{name}_*.csv.gz')):
            df = read_results(p, task.schema)
            assert set(df.identity) == {default_identity(str(df.model.iloc[0]))}, p
            seen += 1
    assert seen >= 22
