"""`wordbench report`: one model through the benchmarks' grids (dummy backend, grids cut small) into one page with
every section, a rerun byte-identical; and the committed cards of the default models are what the main job makes
today from the committed results."""
import os, re, subprocess, sys
import pytest
from wordbench.core import project_root
from wordbench.cli import main

ROOT = project_root()
TASKS = ['wscplus', 'newterm-coma', 'newterm-coma-ll']
SMALL = ['--task-option', 'n=2', '--task-option', 'sample=1']
RANDOM_GRIDS = {'winodict': ['pairs=3', 'shots=[0]'], 'probes-cloze': ['pairs=4', 'datasets=["ROLE-1500"]'],
                'wscplus': ['n=3', 'strategies=["toe-paper-scored", "zero-shot-scored", "few-shot"]'],
                'newterm-coma-ll': ['sample=3']}   # a small grid per system: the test runs in about a minute


def test_report_runs_a_model_and_writes_every_section(tmp_path, capsys, monkeypatch):
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'WORDBENCH_CACHE': str(tmp_path/'cache')}
    args = [sys.executable, '-m', 'wordbench.cli', 'report', '--model', 'toy', '--backend', 'dummy',
            '--tasks', *TASKS, *SMALL, '--results', str(tmp_path/'res'), '--out', str(tmp_path/'card')]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    card = tmp_path/'card'
    assert sorted(p.name for p in card.iterdir()) == ['README.md', 'card.png', 'card.svg', 'card_rows.csv',
                                                      'card_rows.md', 'index.html']
    page = (card/'README.md').read_text()
    for section in ['# Report card: toy', '## Headline per system', '## What ran', '## wscplus: ',
                    '## newterm-coma: ',
                    '## newterm-coma-ll: ', 'Wilson 95%', '| setting | this model | 95% CI | n |',
                    'paper: GPT-4', 'always neither', 'paper: Llama-2-Chat-7B', 'chance', 'unparsable %',
                    'base (clean), summed log-prob |', 'base (clean), per byte (acc_norm) |', "lm-eval's acc_norm",
                    '| verdict |', 'p above (Holm)', 'identity (weights, dtype)', 'reply cap', "Holm's adjustment"]:
        assert section in page, section
    html = (card/'index.html').read_text()
    assert html.count('<table') == 3 + len(TASKS) and '<img src="card.png"' in html
    for name in TASKS: assert (tmp_path/'res'/f'{name}_toy.csv.gz').exists()
    first = {p.name: p.read_bytes() for p in card.iterdir()}
    monkeypatch.delenv('WORDBENCH_RERUN', raising=False)
    again = ['report', '--model', 'toy', '--no-eval', '--tasks', *TASKS, '--results', str(tmp_path/'res'),
             '--out', str(card)]
    assert main(again) == 0
    assert {p.name: p.read_bytes() for p in card.iterdir()} == first
    # nothing changed since: the card is kept as it is; an edited file of the card, or new results, write it again
    written = {p.name: p.stat().st_mtime_ns for p in card.iterdir()}
    capsys.readouterr()
    assert main(again) == 0
    assert 'the card of toy is up to date' in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in card.iterdir()} == written
    (card/'card_rows.md').write_text('edited')
    assert main(again) == 0
    assert (card/'card_rows.md').read_bytes() == first['card_rows.md']
    (tmp_path/'res'/'unrelated.txt').write_text('a new file in the results folder')
    capsys.readouterr()
    assert main(again) == 0
    assert 'up to date' not in capsys.readouterr().err


def test_unknown_task_is_one_line(capsys):
    assert main(['report', '--model', 'toy', '--backend', 'dummy', '--tasks', 'no-such-task', '--no-eval']) == 2
    assert 'no-such-task' in capsys.readouterr().err


@pytest.mark.parametrize('model', ['smollm2-135m', 'gemma3-270m'])
def test_committed_cards_meet_the_acceptance(model):
    "Every cell has a verdict; no interval wholly below its baseline reads otherwise; headlines by rule; MDE sane."
    import pandas as pd
    card = ROOT/'figures'/'models'/model
    if not card.exists(): pytest.skip(f'{card} not generated yet')
    rows = pd.read_csv(card/'card_rows.csv')
    ours = rows[rows.kind == 'ours']
    assert ours.verdict.isin(['above baseline', 'at baseline', 'below baseline', 'degenerate']).all()
    assert not (ours.verdict == 'degenerate').ne(ours.degenerate.fillna('') != '').any()
    wholly_below = ours.hi < ours.baseline_value
    assert ours[wholly_below].verdict.isin(['below baseline', 'degenerate']).all()
    assert (ours[ours.task == 'probes-cloze'].verdict.notna()).all() and (ours.task == 'probes-cloze').any()
    head = ours[ours.headline.astype(bool)]
    assert set(head[head.task == 'winodict'].setting) == {'wsc winodict 5-shot'}     # new words, not the control
    assert set(head[head.task == 'probes-cloze'].setting) == {'ROLE-1500', 'NEG-1500-SIMP-TEMP', 'NEG-1500-SIMP-GEN'}
    page = (card/'README.md').read_text()
    assert 'hf:' + model in page and '| commit |' in page
    paired = [line.strip('|').split('|') for line in page.splitlines() if re.search(r'\| \d+ / \d+ \|', line)]
    assert paired
    for cells in paired:
        p, diff, mde = float(cells[7]), abs(float(cells[5])), cells[8].strip()
        if p < 0.01: assert mde not in ('out of reach', 'no unit differs') and float(mde) <= 1.5 * diff, cells


def test_a_random_model_claims_no_skill(tmp_path, monkeypatch):
    "A seeded random 2-layer Llama (SmolLM2's tokenizer), a small grid per system: every cell a verdict, none above."
    torch = pytest.importorskip('torch')
    import pandas as pd
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from wordbench.resources import materialise_local_model
    tok = AutoTokenizer.from_pretrained(materialise_local_model('smollm2-135m'))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, num_key_value_heads=2, vocab_size=len(tok),
                                         hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                         max_position_embeddings=2048))
    model.generation_config.eos_token_id = tok.eos_token_id
    folder = str(tmp_path/'random-llama')
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    monkeypatch.setenv('WORDBENCH_CACHE', str(tmp_path/'cache'))
    where = ['--results', str(tmp_path/'res'), '--out', str(tmp_path/'card')]
    for task, options in RANDOM_GRIDS.items():
        opts = [x for o in options for x in ('--task-option', o)]
        assert main(['report', '--model', folder, '--backend', 'hf', '--tasks', task, *opts, *where]) == 0
    assert main(['report', '--model', folder, '--no-eval', '--tasks', *RANDOM_GRIDS, *where]) == 0
    ours = pd.read_csv(tmp_path/'card'/'card_rows.csv').query("kind == 'ours'")
    assert set(ours.task) == set(RANDOM_GRIDS)
    assert ours.verdict.isin(['at baseline', 'below baseline', 'degenerate']).all(), ours[['setting', 'verdict']]
    assert 'no headline cell is above baseline' in (tmp_path/'card'/'README.md').read_text()


@pytest.mark.parametrize('model', ['smollm2-135m', 'gemma3-270m'])
def test_committed_cards_are_fresh(model, tmp_path):
    "figures/models/<model>/ is what `wordbench report --model <model> --no-eval` makes today, byte for byte."
    committed = ROOT/'figures'/'models'/model
    if not committed.exists(): pytest.skip(f'{committed} not generated yet')
    assert main(['report', '--model', model, '--no-eval', '--out', str(tmp_path)]) == 0
    for p in committed.iterdir():
        assert (tmp_path/p.name).read_bytes() == p.read_bytes(), f'figures/models/{model}/{p.name} is stale'
