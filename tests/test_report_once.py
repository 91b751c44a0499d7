"""`wordbench report` builds its model once for all the tasks it runs (`evaluate_model` opens it and hands it to
`run_eval` task by task): a backend that counts its constructions, two tiny tasks, one construction."""
import json, os, subprocess, sys
from pathlib import Path

FIXTURES = Path(__file__).parent/'fixtures'
LAUNCHER = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')
PLUGIN = '''
import os
from wordbench.evaluate.tasks import TASKS, register_task
from wordbench.models.dummy import DummyLM
from wordbench.models.lm import register_backend


@register_backend('built')
class Built(DummyLM):
    "The dummy's answers; each construction appends a line to BUILT_LOG."
    def __init__(self, *args, **kw):
        with open(os.environ['BUILT_LOG'], 'a') as f: f.write('built\\n')
        super().__init__(*args, **kw)


class Again(type(TASKS['tiny-arith'])):   # the tiny plugin's task (loaded first) under a second name
    name = 'tiny-arith-again'


register_task(Again())
'''


def test_report_builds_the_model_once(tmp_path):
    (tmp_path/'built_plugin.py').write_text(PLUGIN)
    items = [dict(id=f'sum{i}', a=i, b=i + 1, label=0) for i in range(4)]
    (tmp_path/'items.jsonl').write_text(''.join(json.dumps(it) + '\n' for it in items))
    plugins = os.pathsep.join([str(FIXTURES/'tiny_plugin.py'), str(tmp_path/'built_plugin.py')])
    env = {**{k: v for k, v in os.environ.items() if k not in LAUNCHER}, 'WORDBENCH_PLUGINS': plugins,
           'TINY_ITEMS': str(tmp_path/'items.jsonl'), 'WORDBENCH_CACHE': str(tmp_path/'cache'),
           'BUILT_LOG': str(tmp_path/'built.log')}
    args = ['report', '--model', 'a', '--backend', 'built', '--tasks', 'tiny-arith', 'tiny-arith-again',
            '--results', tmp_path/'res', '--out', tmp_path/'card']
    run = subprocess.run([sys.executable, '-m', 'wordbench', *map(str, args)], env=env, text=True,
                         capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    files = sorted(p.name for p in (tmp_path/'res').glob('*.csv.gz'))
    assert files == ['tiny-arith-again_a.csv.gz', 'tiny-arith_a.csv.gz'], files   # both tasks ran
    assert '## tiny-arith-again: ' in (tmp_path/'card'/'README.md').read_text()
    assert (tmp_path/'built.log').read_text().splitlines() == ['built']   # and the model was built once
