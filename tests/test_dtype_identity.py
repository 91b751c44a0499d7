"""One `dtype` vocabulary (`wordbench.models.hf.HF_DTYPES`): the `--dtype` choices are its keys, and for each of them
the identity the library gives a model, `get_lm('hf', folder, dtype=d).identity()`, is the identity
`wordbench eval --dtype d` writes into the results. The model is a tiny random Llama built offline
(`wordbench.models.conformance.build_family`); every dtype runs on the CPU."""
import json, os, subprocess, sys
from pathlib import Path
import pytest

torch = pytest.importorskip('torch')
from wordbench.models.hf import HF_DTYPES  # noqa: E402

PLUGIN = Path(__file__).parent/'fixtures'/'tiny_plugin.py'
LAUNCHER = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')
EVAL = '''
import sys
from wordbench.cli import main
folder, out = sys.argv[1:]
for d in sys.argv[3:] or {dtypes}:
    assert main(['eval', 'tiny-arith', '--model', folder, '--dtype', d, '--n', '2', '--strategies', 'plain',
                 '--out', f'{{out}}/{{d}}']) == 0, d
'''


@pytest.fixture(scope='module')
def evaluated(tmp_path_factory):
    "A tiny Llama folder, and `wordbench eval tiny-arith --dtype d` of it into `<tmp>/results/<d>/` per dtype."
    from wordbench.models.conformance import build_family
    tmp = tmp_path_factory.mktemp('dtype_identity')
    folder = build_family('llama', tmp/'llama')
    (tmp/'items.jsonl').write_text(''.join(json.dumps(dict(id=f's{i}', a=i, b=1, label=0)) + '\n' for i in range(2)))
    env = {**{k: v for k, v in os.environ.items() if k not in LAUNCHER}, 'WORDBENCH_PLUGINS': str(PLUGIN),
           'TINY_ITEMS': str(tmp/'items.jsonl'), 'WORDBENCH_CACHE': str(tmp/'cache')}
    run = subprocess.run([sys.executable, '-c', EVAL.format(dtypes=list(HF_DTYPES)), folder, str(tmp/'results')],
                         env=env, text=True, capture_output=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return folder, tmp


def test_dtype_choices_are_the_vocabulary(capsys):
    from wordbench.cli import main
    with pytest.raises(SystemExit): main(['score', '--help'])
    assert '--dtype {float32,bfloat16,float16,bfloat16-autocast}' in capsys.readouterr().out
    assert list(HF_DTYPES) == ['float32', 'bfloat16', 'float16', 'bfloat16-autocast']


@pytest.mark.parametrize('dtype', list(HF_DTYPES))
def test_eval_records_the_library_identity(dtype, evaluated, monkeypatch):
    import gzip, csv, io
    from wordbench.models.lm import get_lm
    folder, tmp = evaluated
    monkeypatch.setenv('WORDBENCH_CACHE', str(tmp/'cache'))
    [path] = (tmp/'results'/dtype).glob('tiny-arith_*.csv.gz')
    recorded = {r['identity'] for r in csv.DictReader(io.StringIO(gzip.decompress(path.read_bytes()).decode()))}
    assert recorded == {get_lm('hf', folder, dtype=dtype).identity()}, (dtype, recorded)
