"""`wordbench report`: one model through the benchmarks' grids (dummy backend, grids cut small) into one page with
every section, a rerun byte-identical; and the committed cards of the default models are what the main job makes
today from the committed results."""
import os, subprocess, sys
import pytest
from wordbench.core import project_root
from wordbench.cli import main

ROOT = project_root()
TASKS = ['wscplus', 'newterm-coma', 'newterm-coma-ll']
SMALL = ['--task-option', 'n=2', '--task-option', 'sample=1']


def test_report_runs_a_model_and_writes_every_section(tmp_path):
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'WORDBENCH_CACHE': str(tmp_path/'cache')}
    args = [sys.executable, '-m', 'wordbench.cli', 'report', '--model', 'toy', '--backend', 'dummy',
            '--tasks', *TASKS, *SMALL, '--results', str(tmp_path/'res'), '--out', str(tmp_path/'card')]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    card = tmp_path/'card'
    assert sorted(p.name for p in card.iterdir()) == ['README.md', 'card.png', 'card.svg', 'card_rows.csv',
                                                      'card_rows.md', 'index.html']
    page = (card/'README.md').read_text()
    for section in ['# Report card: toy', '## Headline per system', '## Protocol and replies', '## wscplus: ',
                    '## newterm-coma: ',
                    '## newterm-coma-ll: ', 'Wilson 95%', '| setting | this model | 95% CI | n |',
                    'paper: GPT-4', 'always neither', 'paper: Llama-2-Chat-7B', 'chance', 'unparsable %',
                    'base (clean), summed log-prob |', 'base (clean), per byte (acc_norm) |', "lm-eval's acc_norm"]:
        assert section in page, section
    html = (card/'index.html').read_text()
    assert html.count('<table') == 2 + len(TASKS) and '<img src="card.png"' in html
    for name in TASKS: assert (tmp_path/'res'/f'{name}_toy.csv.gz').exists()
    first = {p.name: p.read_bytes() for p in card.iterdir()}
    assert main(['report', '--model', 'toy', '--no-eval', '--tasks', *TASKS, '--results', str(tmp_path/'res'),
                 '--out', str(card)]) == 0
    assert {p.name: p.read_bytes() for p in card.iterdir()} == first


def test_unknown_task_is_one_line(capsys):
    assert main(['report', '--model', 'toy', '--backend', 'dummy', '--tasks', 'no-such-task', '--no-eval']) == 2
    assert 'no-such-task' in capsys.readouterr().err


@pytest.mark.parametrize('model', ['smollm2-135m', 'gemma3-270m'])
def test_committed_cards_are_fresh(model, tmp_path):
    "figures/models/<model>/ is what `wordbench report --model <model> --no-eval` makes today, byte for byte."
    committed = ROOT/'figures'/'models'/model
    if not committed.exists(): pytest.skip(f'{committed} not generated yet')
    assert main(['report', '--model', model, '--no-eval', '--out', str(tmp_path)]) == 0
    for p in committed.iterdir():
        assert (tmp_path/p.name).read_bytes() == p.read_bytes(), f'figures/models/{model}/{p.name} is stale'
