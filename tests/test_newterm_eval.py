"""End-to-end checks of the NewTerm tasks through the command line: byte-stable results, resumable runs, clean = a
filter, and file:line:field errors."""
import json, subprocess, sys
from wordbench.evaluate.results import read_results
from wordbench.newterm.items import load_items
from wordbench.newterm.task import NEWTERM_SCHEMA, LL_SCHEMA

WB = [sys.executable, '-m', 'wordbench.cli']


def wordbench(*args, check=True):
    p = subprocess.run(WB + list(args), capture_output=True, text=True)
    if check: assert p.returncode == 0, p.stderr[-3000:]
    return p


def test_eval_is_byte_stable_and_resumes_from_the_cache(tmp_path):
    args = ['eval', 'newterm-csj', '--backend', 'dummy', '--model', 'toy', '--years', '2023', '--sample', '4',
            '--strategies', 'base1', 'gold2', '--out', str(tmp_path/'res')]
    wordbench(*args)
    first = (tmp_path/'res'/'newterm-csj_toy.csv.gz').read_bytes()
    wordbench(*args)
    assert (tmp_path/'res'/'newterm-csj_toy.csv.gz').read_bytes() == first
    rows = read_results(tmp_path/'res'/'newterm-csj_toy.csv.gz', NEWTERM_SCHEMA)
    assert len(rows) == 4 * 2 and set(rows.strategy) == {'base1', 'gold2'}
    assert {'reply', 'pred', 'invalid', 'finish_reason', 'max_tokens'} <= set(rows.columns)
    assert rows.invalid.all() and (rows.correct == 0).all()       # dummy replies are never parsable


def test_clean_scores_are_a_filter_of_one_raw_run(tmp_path):
    wordbench('eval', 'newterm-cost-ll', '--backend', 'dummy', '--model', 'toy', '--years', '2022', '--strategies',
              'base1-text', '--out', str(tmp_path), '--no-cache')
    rows = read_results(tmp_path/'newterm-cost-ll_toy.csv.gz', LL_SCHEMA)
    assert len(rows) == 300 and int(rows.clean.sum()) == 230
    clean_ids = {it['id'] for it in load_items('COST', [2022]) if it['clean']}
    assert set(rows[rows.clean.astype(bool)].id) == clean_ids


def test_a_malformed_file_names_file_line_and_field(tmp_path):
    bad = tmp_path/'COMA.jsonl'
    good = dict(choices=['a', 'b', 'c', 'd'], gold=1, meaning='m', question='The t ran.', split='cause', term='t',
                type='new words not deduced')
    bad.write_text(json.dumps(good) + '\n' + json.dumps({**good, 'split': 'why'}) + '\n')
    p = wordbench('eval', 'newterm-coma', '--backend', 'dummy', '--model', 'toy', '--path', str(bad), '--years', 'mine',
                  '--out', str(tmp_path), '--no-cache', check=False)
    assert p.returncode == 2
    assert "COMA.jsonl:2: field 'split': expected 'cause' or 'effect'" in p.stderr


def test_a_built_file_evaluates_like_a_released_one(tmp_path):
    src = load_items('COMA', [2022])[:3]
    f = tmp_path/'COMA.jsonl'
    f.write_text(''.join(json.dumps({k: it[k] for k in ('choices', 'gold', 'meaning', 'question', 'split', 'term')} |
                                    {'type': 'new words not deduced'}) + '\n' for it in src))
    wordbench('eval', 'newterm-coma-ll', '--backend', 'dummy', '--model', 'toy', '--path', str(f), '--years', 'built',
              '--strategies', 'base1', '--out', str(tmp_path), '--no-cache')
    rows = read_results(tmp_path/'newterm-coma-ll_toy.csv.gz', LL_SCHEMA)
    assert rows.id.tolist() == ['built/COMA/1', 'built/COMA/2', 'built/COMA/3']
    assert rows.label.tolist() == [it['label'] for it in src]


def test_the_ll_rows_decide_three_ways_and_circular_rows_count_rotations(tmp_path):
    wordbench('eval', 'newterm-coma-ll', '--backend', 'dummy', '--model', 'toy', '--years', '2022', '--sample', '3',
              '--strategies', 'base1-text', 'base1-circular', '--out', str(tmp_path), '--no-cache')
    rows = read_results(tmp_path/'newterm-coma-ll_toy.csv.gz', LL_SCHEMA)
    text, spun = (rows[rows.strategy == s] for s in ('base1-text', 'base1-circular'))
    assert len(text) == len(spun) == 3 and text.prior3.notna().all()
    assert set(text.pred_pmi) <= set('ABCD') | {''} and text.correct_pmi.notna().all()
    assert spun.rotation_preds.str.len().eq(4).all() and spun.rotations_right.between(0, 4).all()
    assert (spun.correct == spun.rotations_right.eq(4).astype(int)).all() and text.rotations_right.isna().all()
