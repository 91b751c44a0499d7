"""A task defined outside the package (tests/fixtures/tiny_plugin.py) runs through `wordbench build`, `wordbench eval`,
the results files and `wordbench regenerate`, with the dummy backend and no edit to any shared module."""
import os, subprocess, sys
from pathlib import Path
import nbformat
import pandas as pd

BIN = Path(sys.executable).parent
PLUGIN = Path(__file__).parent/'fixtures'/'tiny_plugin.py'

REPORT = [
    ('markdown', '# Tiny arithmetic\nAccuracy per model and strategy, from the results files.'),
    ('code', "results_dir = None\nmodels = ['a']\nout_dir = None", ['parameters']),
    ('code', "import sys\nsys.path.insert(0, %r)\nimport tiny_plugin\n"
             "from wordbench.evaluate.tasks import TASKS\nfrom wordbench.stats import accuracy_table\n"
             "from wordbench.publish.analysis import save_table\n"
             "res = TASKS['tiny-arith'].results(models, results_dir, require={'strategy': ['plain', 'words']})\n"
             "acc = accuracy_table(res)\nsave_table(acc, 'tiny_arith_report', out_dir)\nacc" % str(PLUGIN.parent)),
]


def report_notebook(path):
    kernelspec = {'name': 'python3', 'display_name': 'python3', 'language': 'python'}
    nb = nbformat.v4.new_notebook(metadata={'kernelspec': kernelspec})
    for kind, src, *tags in REPORT:
        cell = nbformat.v4.new_markdown_cell(src) if kind == 'markdown' else nbformat.v4.new_code_cell(src)
        if tags: cell.metadata['tags'] = tags[0]
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def wordbench(*args, env):
    out = subprocess.run([str(BIN/'wordbench'), *map(str, args)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_external_task_end_to_end(tmp_path):
    env = {**os.environ, 'WORDBENCH_PLUGINS': str(PLUGIN), 'TINY_ITEMS': str(tmp_path/'items.jsonl'),
           'TINY_NOTEBOOK': str(report_notebook(tmp_path/'tiny_arith_report.ipynb')),
           'WORDBENCH_CACHE': str(tmp_path/'cache')}
    assert 'tiny-arith' in wordbench('eval', '--help', env=env)
    assert 'tiny-arith' in wordbench('list', 'tasks', '--grid', 'cpu', env=env).split()
    wordbench('build', 'tiny-arith', '--n', '5', env=env)
    assert len((tmp_path/'items.jsonl').read_text().splitlines()) == 5
    for model in ('a', 'b'):
        wordbench('eval', 'tiny-arith', '--model', model, '--backend', 'dummy', '--grid', 'cpu',
                  '--out', tmp_path/'results', env=env)
    res = pd.read_csv(tmp_path/'results'/'tiny-arith_a.csv.gz')
    assert len(res) == 4 * 2 and set(res.strategy) == {'plain', 'words'} and not res.failed.any()
    assert list(res.columns[:10]) == ['task', 'model', 'strategy', 'shots', 'seed', 'id', 'label', 'pred', 'correct',
                                      'failed']
    first = (tmp_path/'results'/'tiny-arith_a.csv.gz').read_bytes()
    wordbench('eval', 'tiny-arith', '--model', 'a', '--backend', 'dummy', '--grid', 'cpu', '--out', tmp_path/'results',
              env=env)
    assert (tmp_path/'results'/'tiny-arith_a.csv.gz').read_bytes() == first
    figs = tmp_path/'figs'
    wordbench('regenerate', 'tiny_arith_report', '--models', 'a', 'b', '--results', tmp_path/'results', '--out', figs,
              env=env)
    table = pd.read_csv(figs/'tiny_arith_report.csv')
    assert table.model.tolist() == ['a', 'a', 'b', 'b'] and (table.n_items == 4).all()
    assert (figs/'notebooks'/'tiny_arith_report.ipynb').exists()
    assert '## tiny_arith_report' in (figs/'README.md').read_text()
