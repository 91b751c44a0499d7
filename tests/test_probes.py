"End-to-end checks of the psycholinguistic probes through the command line: builders, the cloze task, broken files."
import json
import pandas as pd
import pytest
from wordbench.cli import main
from wordbench.core import raw_path, DataError
from wordbench.evaluate.results import read_results


def run(*args) -> int:
    return main([str(a) for a in args])


def test_temp_rebuild_is_byte_identical(tmp_path):
    assert run('build', 'probes-temp', '--negatives', 'released', '--out', tmp_path) == 0
    built = (tmp_path/'NEG-1500-SIMP-TEMP_released.txt').read_bytes()
    assert built == raw_path('probes', 'NEG-1500-SIMP-TEMP.txt').read_bytes()
    report = json.loads((tmp_path/'NEG-1500-SIMP-TEMP_released.json').read_text())
    assert report['identical_to_released'] and report['pairs'] == 770


def test_temp_seeded_variant(tmp_path):
    assert run('build', 'probes-temp', '--seed', 3, '--out', tmp_path) == 0
    lines = (tmp_path/'NEG-1500-SIMP-TEMP_seeded3.txt').read_text().split('\n')
    released = raw_path('probes', 'NEG-1500-SIMP-TEMP.txt').read_text().split('\n')
    assert len(lines) == 1540 and lines[0::2] == released[0::2] and lines[1::2] != released[1::2]
    assert json.loads((tmp_path/'NEG-1500-SIMP-TEMP_seeded3.json').read_text())['false_negations'] == 0


def test_cloze_eval_dummy(tmp_path):
    args = ['eval', 'probes-cloze', '--backend', 'dummy', '--model', 'toy', '--out', tmp_path, '--no-cache',
            '--datasets', 'NEG-136-SIMP', 'ROLE-1500', '--pairs', 3]
    assert run(*args) == 0
    p = tmp_path/'probes-cloze_toy.csv.gz'
    first = p.read_bytes()
    from wordbench.probes.task import CLOZE_SCHEMA, cloze_scores
    res = read_results(p, CLOZE_SCHEMA)
    assert len(res) == 12 and not res.failed.any()
    assert set(res.dataset) == {'NEG-136-SIMP', 'ROLE-1500'}
    scores = cloze_scores(res)
    assert set(scores.rule) == {'paper', 'code', 'clean', 'rank', 'whole-word'}
    assert run(*args) == 0
    assert p.read_bytes() == first     # a rerun gives the same bytes


def test_cloze_unknown_dataset(tmp_path):
    with pytest.raises(ValueError, match=r"unknown probe dataset\(s\) \['NEG-9'\]"):
        run('eval', 'probes-cloze', '--backend', 'dummy', '--model', 'toy', '--out', tmp_path, '--no-cache',
            '--datasets', 'NEG-9')


def test_generate_dummy(tmp_path, monkeypatch):
    "The report lists every file of the run; the folder's calls log is beside them (a fresh cache: calls are made)."
    monkeypatch.setenv('WORDBENCH_CACHE', str(tmp_path/'cache'))
    out = tmp_path/'out'
    assert run('build', 'probes-generate', '--kind', 'role', '--backend', 'dummy', '--model', 'toy', '--prompts', 2,
               '--tagger', 0, '--out', out) == 0
    rep = json.loads((out/'role_toy_s0.json').read_text())
    assert rep['prompts'] == 2 and rep['sentences'] == 2 and rep['kept_pairs'] == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(rep['files'] + ['calls.jsonl'])
    assert len((out/'calls.jsonl').read_text().splitlines()) == 2


def test_broken_prediction_files(tmp_path):
    from wordbench.probes.published import score_prediction_file
    (tmp_path/'empty.txt').write_text('')
    with pytest.raises(DataError, match=r"empty\.txt:1: field 'line count': 0 prediction lines for 88 sentences"):
        score_prediction_file(tmp_path/'empty.txt', 'ROLE-88')
    (tmp_path/'long.txt').write_text('\n'.join(["['a']"] * 89))
    with pytest.raises(DataError, match=r"long\.txt:89: field 'line count': 89 prediction lines for 88"):
        score_prediction_file(tmp_path/'long.txt', 'ROLE-88')


def test_published_long_table_columns():
    "The committed figures/probes_published.csv has the columns the issue asks for, and every non-match says why."
    from wordbench.core import project_root
    p = project_root()/'figures'/'probes_published.csv'
    if not p.exists():
        pytest.skip('figures/probes_published.csv not generated yet (wordbench regenerate probes_published)')
    df = pd.read_csv(p, keep_default_na=False)
    assert {'dataset', 'model', 'rule', 'metric', 'value', 'n'} <= set(df.columns)
    assert set(df.metric) == {'top1', 'top5', 'top10', 'top20', 'sensitivity'}
    assert set(df.rule) == {'paper', 'code', 'clean'}
    paper = df[(df.rule == 'paper') & (df.paper != '')]
    assert not paper[~paper.status.isin(['exact', 'rounding'])].cause.eq('').any()
    power = pd.read_csv(project_root()/'figures'/'probes_power.csv')
    assert {'dataset', 'model_a', 'model_b', 'n', 'power'} <= set(power.columns)


def test_compare_models_any_system():
    "The shared paired comparison works on another system's committed results in one call (WinoDict here)."
    from wordbench.core import project_root
    from wordbench.stats import compare_models
    from wordbench.winodict.task import WINODICT
    res = WINODICT.results(['smollm2-135m', 'gemma3-270m'], project_root()/'data'/'results')
    res = res[(res.strategy == 'def_suffix') & (res.shots == 0)]
    c = compare_models(res, 'smollm2-135m', 'gemma3-270m', r=2000)
    assert c['n'] + c['n_failed'] == len(res) // 2 and 0 <= c['mcnemar_p'] <= 1 and 0 <= c['power'] <= 1
    assert abs(c['permutation_p'] - c['mcnemar_p']) < 0.05
